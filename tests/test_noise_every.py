"""``watch(noise_every=N)`` and ``"auto"`` (docs/noise.md, "Cost"): the noise scale on one recorded
step in N, its hooks on only for those steps, a recorded step's figures exactly that step's, the
EMAs over the recorded steps only; "auto" choosing N from the measured CPU (noise_cadence.py)."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
import torch
from test_noise_scale import B, K, Net, check_step, data, expected, reference, train, train_step
from torch import nn

import gradexplorer as gx
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.runs.noise_rows import noise_params, noise_rows, snr_curve
from gradexplorer.core.runs.run import Run
from gradexplorer.core.watch import noise_cadence as NC
from gradexplorer.diagnose import NoiseSettings


def capture_hooks(model) -> int:
    """The tensor hooks on the parameters (the capture's: the probe's are post-accumulate)."""
    return sum(len(p._backward_hooks or {}) for p in model.parameters())


def test_one_step_in_three_its_figures_exact_and_no_hook_on_the_others(tmp_path, run_cli):
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    seen, refs, hooks, cleared = {}, [], [], []
    with gx.watch(model, opt, tmp_path / "run", update_ratio=False, noise_every=3,
                  noise_scale=NoiseSettings(beta=0.8)) as rec:
        for step in range(1, 8):
            hooks.append(capture_hooks(model))  # during the step's backwards
            # none left at all: an emptied hook dict still has autograd call into Python
            cleared.append(all(p._backward_hooks is None for p in model.parameters()))
            x, y = data(step)
            refs.append(reference(model, x, y + 2, K, B))
            for i in range(K):
                (nn.functional.mse_loss(model(x[i * B:(i + 1) * B]), y[i * B:(i + 1) * B] + 2) / K
                 ).backward()
            opt.step()
            opt.zero_grad()
            if rec.noise.latest is not None and rec.noise.latest.step == step:
                seen[step] = rec.noise.latest
    n = len(list(model.parameters()))
    assert hooks == [n, 0, 0, n, 0, 0, n]  # the capture's hooks only on the steps it records
    assert cleared == [False, True, True, False, True, True, False]
    assert sorted(seen) == [1, 4, 7]
    for step, noise in seen.items():
        check_step(noise, refs[step - 1])  # float64 from explicit micro-batch gradients
    # the EMAs over the recorded steps only: weights beta^j over steps 7, 4, 1
    t = np.array([seen[s].whole.trace for s in (1, 4, 7)])
    g = np.array([seen[s].whole.g_sq for s in (1, 4, 7)])
    w = 0.2 * 0.8 ** np.arange(2, -1, -1)
    assert seen[7].smoothed.trace == pytest.approx(w @ t / w.sum(), rel=1e-12)
    assert seen[7].smoothed.g_sq == pytest.approx(w @ g / w.sum(), rel=1e-12)
    for j, name in enumerate(seen[7].names):  # each parameter's smoothed SNR likewise
        per = np.array([expected(*refs[s - 1][name][:2], K, B) for s in (1, 4, 7)])
        assert seen[7].per["snr_ema"][j] == pytest.approx(B * (w @ per[:, 0]) / (w @ per[:, 1]),
                                                          rel=1e-4)
    with Run(tmp_path / "run") as run:
        run.check(last=7)  # core/runs/validate.py reads the settings
        assert run.settings["noise_every"] == 3
        assert [r["step"] for r in noise_rows(run)] == [1, 4, 7]
        assert noise_params(run, 5) == {}
        assert snr_curve(run, "fc1.weight")[0] == [1, 4, 7]
    code, out, _ = run_cli("inspect", tmp_path / "run", "--step", "4")
    assert code == 0 and "noise scale on one step in 3 (the EMAs over those steps)" in out
    code, out, _ = run_cli("inspect", tmp_path / "run", "--step", "5")
    assert code == 0 and "noise scale: none at this step; noise scale on one step in 3" in out
    assert "the last at step 4 (`--step 4`)" in out
    code, _, _ = run_cli("report", tmp_path / "run", "--out", tmp_path / "r.html")  # validated on open
    assert code == 0 and "noise scale on one step in 3" in (tmp_path / "r.html").read_text()


def test_bad_noise_every_is_a_one_line_error_and_leaves_the_model_alone():
    model = Net()
    for bad in (0, -2, 2.5, True, "fast", None):
        with pytest.raises(UserError, match="noise_every") as err:
            gx.watch(model, noise_every=bad)
        assert "\n" not in str(err.value)
    assert capture_hooks(model) == 0 and gx.watch(model, noise_every="auto").close() is None


def test_auto_takes_the_smallest_cadence_within_five_percent_of_the_measured_step():
    costs = {"bare": 0.010, "capture": 0.0011}  # 11% of the step on the steps it records
    clock = [0.0]
    cadence = NC.NoiseCadence("auto", clock=lambda: clock[0])
    told = []
    cadence.on_change = lambda step, every: told.append([step, every])
    ons = []
    for step in range(1, 41):
        ons.append(cadence.now)
        clock[0] += costs["bare"] + (costs["capture"] if cadence.now else 0.0)
        cadence.close(step)
    planned = NC.TARGET * (1 - NC.MARGIN) * costs["bare"]  # its margin kept
    want = math.ceil(costs["capture"] / planned)
    # told from the first step with figures (the run's settings say it then), then each change
    assert cadence.every == want == 4 and told == [[1, 2], *cadence.changes] and told[-1][1] == want
    on = [s for s, o in zip(range(1, 41), ons, strict=True) if o]
    assert all(b - a == want for a, b in zip(on[-4:], on[-3:], strict=False))
    # a capture within 5% · (1 − margin), but not within half of it: one step in 2, for at 1
    # nothing more is measured; within half of it: every recorded step
    for cost, every, steps in ((0.0002, 2, range(41, 120)), (0.0001, 1, range(120, 200))):
        costs["capture"] = cost
        for step in steps:  # (the medians over the last 16 pairs)
            clock[0] += costs["bare"] + (costs["capture"] if cadence.now else 0.0)
            cadence.close(step)
        assert cadence.every == every and cadence.changes[-1][1] == every


def test_auto_goes_rarer_once_over_its_plan_though_within_five_percent():
    """At START (one step in 2) a capture of 8% of the step costs 4% a step: within TARGET, but
    over the planned share (TARGET less the margin): one step in 3."""
    clock = [0.0]
    cadence = NC.NoiseCadence("auto", clock=lambda: clock[0])
    for step in range(1, 21):
        clock[0] += 0.010 + (0.0008 if cadence.now else 0.0)
        cadence.close(step)
    assert 0.0008 / NC.START < NC.TARGET * 0.010
    assert cadence.every == math.ceil(0.0008 / (NC.TARGET * (1 - NC.MARGIN) * 0.010)) == 3
    assert [every for _, every in cadence.changes] == [3]


def test_auto_is_the_default_and_its_recorded_steps_equal_float64_from_each_micro_batch(tmp_path):
    assert inspect.signature(gx.watch).parameters["noise_every"].default == "auto"
    assert inspect.signature(gx.Recorder).parameters["noise_every"].default == "auto"
    torch.manual_seed(5)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    clock, refs, seen, ons = [0.0], [], {}, []
    with gx.watch(model, opt, tmp_path / "run", update_ratio=False) as rec:  # the default cadence
        cadence = rec.noise.cadence
        # made-up CPU (none of the machine's load in it): the capture 10% of a 10 ms step; the
        # hooks' clock is the cadence's (watch's own CPU in its hooks: 0 here)
        cadence.clock = lambda: clock[0]
        for step in range(1, 31):
            ons.append(cadence.now)
            clock[0] += 0.010 + (0.001 if cadence.now else 0.0)
            refs.append(reference(model, *data(step), K, B))
            train_step(model, opt, step)
            if rec.noise.latest is not None and rec.noise.latest.step == step:
                seen[step] = rec.noise.latest
    want = math.ceil(0.001 / (NC.TARGET * (1 - NC.MARGIN) * 0.010))
    assert cadence.auto and cadence.every == want == 4
    assert sorted(seen) == [s for s, on in zip(range(1, 31), ons, strict=True) if on]
    assert 7 <= len(seen) < 15  # one step in 2 until its first choice, then one in 4
    for step, noise in seen.items():
        check_step(noise, refs[step - 1])  # float64 from explicit micro-batch gradients
    with Run(tmp_path / "run") as run:
        assert run.settings["noise_every"] == "auto"
        assert [r["step"] for r in noise_rows(run)] == sorted(seen)


def test_a_run_without_a_noise_scale_says_nothing_of_its_cadence(tmp_path, run_cli):
    """One backward a step, the default "auto": no noise scale, so no cadence in the settings
    (inspect would say "none at this step" at every step, the app keep an empty SNR column)."""
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with gx.watch(model, opt, tmp_path / "run", update_ratio=False) as rec:
        train(model, opt, 5, k=1)
        assert rec.noise.latest is None
    with Run(tmp_path / "run") as run:
        assert "noise_every" not in run.settings and noise_rows(run) == []
    code, out, _ = run_cli("inspect", tmp_path / "run", "--step", "3")
    assert code == 0 and "noise scale" not in out


def test_auto_in_a_run_keeps_its_choices_in_the_settings(tmp_path, run_cli):
    torch.manual_seed(1)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    clock = [0.0]
    with gx.watch(model, opt, tmp_path / "run", update_ratio=False, noise_every="auto") as rec:
        cadence = rec.noise.cadence
        cadence.clock = lambda: clock[0]  # made-up costs: the capture 20% of a 10 ms step
        for _ in range(30):
            clock[0] += 0.010 + (0.002 if cadence.now else 0.0)
            train(model, opt, 1)
        every = cadence.every
    assert every == math.ceil(0.002 / (NC.TARGET * (1 - NC.MARGIN) * 0.010)) == 7
    with Run(tmp_path / "run") as run:
        assert run.settings["noise_every"] == "auto"
        assert run.settings["noise_cadence"] == cadence.changes and cadence.changes[-1][1] == 7
        steps = [r["step"] for r in noise_rows(run)]
    assert steps[:2] == [1, 3] and steps[-1] - steps[-2] == 7
    code, out, _ = run_cli("inspect", tmp_path / "run", "--step", steps[-1])
    assert code == 0 and f"noise scale on one step in 7 (auto, for ≤ 5% of the step; the EMAs over those " \
           f"steps: 7 from step {cadence.changes[-1][0]})" in out


def test_with_stats_every_the_recorded_steps_are_at_least_n_apart_and_exact(tmp_path):
    torch.manual_seed(3)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    refs, seen = [], {}
    with gx.watch(model, opt, tmp_path / "run", update_ratio=False, stats_every=2,
                  noise_every=3) as rec:
        for step in range(1, 11):
            refs.append(reference(model, *data(step), K, B))
            train_step(model, opt, step)
            if rec.noise.latest is not None and rec.noise.latest.step == step:
                seen[step] = rec.noise.latest
    assert sorted(seen) == [2, 6, 10]  # recorded steps 2, 4, …: the next one 3 or more steps on
    for step, noise in seen.items():
        check_step(noise, refs[step - 1])  # the unrecorded step 5's backwards not in step 6's
    with Run(tmp_path / "run") as run:
        assert [r["step"] for r in noise_rows(run)] == [2, 6, 10]


def test_a_resumed_run_goes_on_from_its_last_step_and_counts_its_cadence_on(tmp_path):
    """``resume=True``: the noise scale's steps go on from the run's last step, its cadence
    counted on from the run's last step with a noise scale (the EMAs start again); every
    figure exact."""
    torch.manual_seed(4)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    refs, seen = [], {}
    for steps, resume in ((range(1, 5), False), (range(5, 11), True)):
        with gx.watch(model, opt, tmp_path / "run", update_ratio=False, noise_every=3,
                      resume=resume) as rec:
            for step in steps:
                refs.append(reference(model, *data(step), K, B))
                train_step(model, opt, step)
                if rec.noise.latest is not None and rec.noise.latest.step == step:
                    seen[step] = rec.noise.latest
            assert rec.step_count == steps[-1]
    assert sorted(seen) == [1, 4, 7, 10]  # as one run's: resumed after step 4, 3 steps on from it
    for step, noise in seen.items():
        check_step(noise, refs[step - 1])
    assert seen[7].smoothed.trace == pytest.approx(seen[7].whole.trace, rel=1e-12)  # EMAs anew
    with Run(tmp_path / "run") as run:
        run.check(last=10)
        assert [r["step"] for r in noise_rows(run)] == [1, 4, 7, 10]


def test_a_resumed_run_with_stats_every_numbers_the_loops_steps(tmp_path):
    """``stats_every=2``: a first run of 5 steps records 2 and 4; resumed, the loop's 6th step
    is step 6 (not 5), so the recorded steps and the noise scale's are one run's: 2, 6, 10."""
    torch.manual_seed(3)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    refs, seen = [], {}
    for steps, resume in ((range(1, 6), False), (range(6, 11), True)):
        with gx.watch(model, opt, tmp_path / "run", update_ratio=False, stats_every=2,
                      noise_every=3, resume=resume) as rec:
            for step in steps:
                refs.append(reference(model, *data(step), K, B))
                train_step(model, opt, step)
                if rec.noise.latest is not None and rec.noise.latest.step == step:
                    seen[step] = rec.noise.latest
            assert rec.step_count == steps[-1]
    assert sorted(seen) == [2, 6, 10]
    for step, noise in seen.items():
        check_step(noise, refs[step - 1])  # the loop's step 6 is the run's step 6
    with Run(tmp_path / "run") as run:
        assert run.steps == [2, 4, 6, 8, 10]
        assert [r["step"] for r in noise_rows(run)] == [2, 6, 10]


def test_auto_resumed_goes_on_at_the_n_last_in_force(tmp_path):
    """``"auto"`` resumed: the ``N`` the run's settings last kept (``noise_cadence``) is in force
    from the resumed recorder's first step, counted on from the run's last noise-scale step."""
    torch.manual_seed(1)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    clock, refs, seen, changes = [0.0], [], {}, None
    for steps, resume in ((range(1, 31), False), (range(31, 46), True)):
        with gx.watch(model, opt, tmp_path / "run", update_ratio=False, resume=resume) as rec:
            cadence = rec.noise.cadence
            cadence.clock = lambda: clock[0]  # made-up costs: the capture 20% of a 10 ms step
            if resume:
                assert cadence.every == 7 and cadence.changes == changes
            for step in steps:
                clock[0] += 0.010 + (0.002 if cadence.now else 0.0)
                refs.append(reference(model, *data(step), K, B))
                train_step(model, opt, step)
                if rec.noise.latest is not None and rec.noise.latest.step == step:
                    seen[step] = rec.noise.latest
            changes = cadence.changes
        if not resume:
            assert cadence.every == 7
            last = max(seen)
    assert cadence.every == 7 and cadence.changes == changes
    after = [s for s in sorted(seen) if s > 30]
    assert after[0] == last + 7 and all(b - a == 7 for a, b in zip(after, after[1:], strict=False))
    for step in after:
        check_step(seen[step], refs[step - 1])
    with Run(tmp_path / "run") as run:
        assert run.settings["noise_every"] == "auto" and run.settings["noise_cadence"] == changes
        assert [r["step"] for r in noise_rows(run)] == sorted(seen)


def test_a_cadence_resumed_behind_its_last_noise_step_counts_anew():
    """A trainer resumed from a checkpoint before the run's last noise-scale step (an
    integration numbers the steps by its global step): the cadence counts anew from its first
    recorded step, as a fresh one; ahead of it, on from it."""
    for last, step, ons in ((4, 2, [3, 6, 9]), (4, 4, [7, 10]), (None, 4, [5, 8])):
        cadence = NC.NoiseCadence(3, stats_every=1)
        cadence.go_on(last, step=step)
        on = []
        for s in range(step + 1, 11):
            if cadence.now:
                on.append(s)
            cadence.close(s)
        assert on == ons, (last, step)
