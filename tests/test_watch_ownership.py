"""``watch`` owns what it touches: arguments checked before anything is attached, one recorder
per model, every hook removed by close(), one writer per run directory, runs never mixed."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

import gradexplorer as gx

ROOT = Path(__file__).resolve().parents[1]


def make_model(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def grads_of(model):
    x = torch.randn(5, 4, generator=torch.Generator().manual_seed(1))
    model.zero_grad()
    model(x).square().mean().backward()
    return {n: p.grad.clone() for n, p in model.named_parameters()}


def train(model, opt, steps, rec=None):
    for step in range(steps):
        x = torch.randn(5, 4, generator=torch.Generator().manual_seed(step))
        opt.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        if rec is not None:
            rec.note_loss(loss)
        opt.step()


def no_hooks_left(model, opt=None):
    for m in model.modules():
        assert not (m._forward_hooks or m._forward_pre_hooks or m._backward_hooks
                    or m._backward_pre_hooks), m
        assert not m._is_full_backward_hook
    for p in model.parameters():
        assert not (p._backward_hooks or getattr(p, "_post_accumulate_grad_hooks", None))
    if opt is not None:
        assert not (opt._optimizer_step_pre_hooks or opt._optimizer_step_post_hooks)


BAD_CALLS = {
    "bins=2.5": ({"bins": 2.5}, "bins must be a whole number"),
    "bins=0": ({"bins": 0}, "bins must be at least 1"),
    "bins huge": ({"bins": 10**6}, "bins must be at most"),
    "stats_every=1.5": ({"stats_every": 1.5}, "stats_every must be a whole number"),
    "histogram_every='2'": ({"histogram_every": "2"},
                            "histogram_every must be a whole number, not str"),
    "stats_every=True": ({"stats_every": True}, "stats_every must be a whole number, not bool"),
    "snapshot_every=0.5": ({"snapshot_every": 0.5}, "snapshot_every"),
    "keep_snapshots='1'": ({"keep_snapshots": "1"}, "keep_snapshots"),
    "hooks list": ({"hooks": ["2"]}, "hooks must be a dict"),
    "hook number": ({"hooks": {"2": 0.5}}, "actions as text"),
    "hook module": ({"hooks": {"2": "scale:0.5", "nope": "block"}}, "no module 'nope'"),
    "hook action": ({"hooks": {"2": "scale:0.5", "0": "explode"}}, "unknown hook action"),
    "run_dir ''": ({"run_dir": ""}, "run_dir is empty"),
    "run_dir 3": ({"run_dir": 3}, "run_dir must be a path"),
    "per_rank": ({"per_rank": "yes"}, "per_rank must be True or False"),
    "both": ({"overwrite": True, "resume": True}, "not both"),
}


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_a_refused_call_leaves_the_model_as_it_was(tmp_path, case, monkeypatch):
    monkeypatch.chdir(tmp_path)
    kwargs, words = BAD_CALLS[case]
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = grads_of(model)
    with pytest.raises(gx.UserError) as caught:
        gx.watch(model, opt, **kwargs)
    assert words in str(caught.value) and "\n" not in str(caught.value), str(caught.value)
    after = grads_of(model)
    assert all(torch.equal(before[n], after[n]) for n in before)  # no 0.5 left on layer 2
    no_hooks_left(model, opt)
    assert list(tmp_path.iterdir()) == []  # nothing written (run_dir "" would write here)
    with gx.watch(model, opt, tmp_path / "run", hooks={"2": "scale:0.5"}):  # the corrected call
        scaled = grads_of(model)  # layer 2's gradient input: everything before it, halved once
        assert torch.allclose(scaled["0.weight"], 0.5 * before["0.weight"], rtol=1e-6, atol=0)
        assert torch.equal(scaled["2.weight"], before["2.weight"])


def test_a_run_dir_that_cannot_be_made_detaches_the_hooks_attached(tmp_path):
    (tmp_path / "afile").write_text("x")
    model = make_model()
    before = grads_of(model)
    with pytest.raises(gx.UserError, match="cannot create run directory"):
        gx.watch(model, None, tmp_path / "afile" / "run", hooks={"2": "scale:0.5"})
    assert torch.equal(grads_of(model)["0.weight"], before["0.weight"])
    no_hooks_left(model)
    gx.watch(model).close()  # and the model is not left marked as watched


def test_a_second_watch_is_refused_and_close_removes_every_hook(tmp_path):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    rec = gx.watch(model, opt, tmp_path / "run", hooks={"1": "observe", "2": "scale:0.5"},
                   snapshot_every=1)
    with pytest.raises(gx.UserError, match="already watched by a recorder into") as caught:
        gx.watch(model, opt, tmp_path / "other", hooks={"2": "scale:0.5"})
    assert "rec.close()" in str(caught.value) and gx.Recorder.of(model) is rec
    assert not (tmp_path / "other").exists()
    train(model, opt, 2, rec)
    assert gx.open_run(tmp_path / "run").steps == [1, 2]  # recorded once, not twice
    gx.Recorder.of(model).close()  # what the line offers when `rec` was not kept
    assert gx.Recorder.of(model) is None
    no_hooks_left(model, opt)
    before = grads_of(model)
    rec = gx.watch(model, opt)  # after close() the model may be watched again
    assert torch.equal(grads_of(model)["0.weight"], before["0.weight"])
    rec.close()


def test_note_loss_takes_a_scalar_or_per_sample_losses_and_refuses_text(tmp_path):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    per_sample = torch.tensor([1.0, 2.0, 4.5])
    with gx.watch(model, opt, tmp_path / "run") as rec:
        for loss in (2.5, torch.tensor(3.0), per_sample, torch.tensor([[7.0]])):
            grads_of(model)
            rec.note_loss(loss)
            opt.step()
        for bad in ("0.3", None, torch.tensor([1 + 2j]), torch.zeros(0), [1.0]):
            with pytest.raises(gx.UserError, match="loss must be") as caught:
                rec.note_loss(bad) if bad is not None else rec.note_loss(object())
            assert "\n" not in str(caught.value)
        grads_of(model)
        opt.step()  # the refused calls left no loss behind: this step has none
    run = gx.open_run(tmp_path / "run")
    losses = [run.step_info(s)["loss"] for s in run.steps]
    assert losses[:4] == [2.5, 3.0, pytest.approx(7.5 / 3, rel=1e-15), 7.0]
    assert losses[4] is None
    rec = gx.watch(make_model())
    with pytest.raises(gx.UserError, match="loss must be"):
        rec.step(loss="high")
    rec.close()


def test_a_second_writer_of_a_run_dir_is_refused(tmp_path):
    rec = gx.watch(make_model(), None, tmp_path / "run")
    with pytest.raises(gx.UserError, match="another gradexplorer process is writing the run"):
        gx.watch(make_model(1), None, tmp_path / "run", overwrite=True)
    rec.close()
    gx.watch(make_model(1), None, tmp_path / "run", overwrite=True).close()


def test_an_existing_run_is_refused_replaced_or_resumed(tmp_path):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gx.watch(model, opt, tmp_path / "run", snapshot_every=3) as rec:
        train(model, opt, 3, rec)
    with pytest.raises(gx.UserError, match="already holds a run; give overwrite=True"):
        gx.watch(model, opt, tmp_path / "run")
    with gx.watch(model, opt, tmp_path / "run", resume=True) as rec:
        train(model, opt, 2, rec)
    run = gx.open_run(tmp_path / "run")
    assert run.steps == [1, 2, 3, 4, 5] and list(run.snapshots) == [3]
    other = nn.Sequential(nn.Linear(4, 3))
    with pytest.raises(gx.UserError, match="recorded another model"):
        gx.watch(other, None, tmp_path / "run", resume=True)
    no_hooks_left(other)
    with gx.watch(other, None, tmp_path / "run", overwrite=True) as rec:
        grads_of(other)
        rec.step()
    run = gx.open_run(tmp_path / "run")
    assert run.steps == [1] and run.parameters == ["0.weight", "0.bias"]
    assert not run.snapshots and not (tmp_path / "run" / "snapshots").exists()


WRITER = textwrap.dedent("""
    import sys, time, torch
    from torch import nn
    import gradexplorer as gx
    model = nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    rec = gx.watch(model, opt, sys.argv[1])
    for _ in range(2):
        opt.zero_grad()
        model(torch.randn(4, 3)).sum().backward()
        opt.step()
    print("ready", flush=True)
    sys.stdin.read()  # until the test is done with it
""")


def test_follow_ends_when_the_writer_dies_and_its_lock_refuses_others(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path / "run")], env=env,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout.readline().strip() == "ready"
            with pytest.raises(gx.UserError, match="another gradexplorer process is writing"):
                gx.watch(nn.Linear(3, 2), None, tmp_path / "run", resume=True)
            seen, start = [], time.monotonic()
            with gx.open_run(tmp_path / "run") as run:
                for step in run.follow(poll=0.01, timeout=120):  # the timeout guards a regression
                    seen.append(step)
                    if len(seen) == 2:
                        os.kill(proc.pid, signal.SIGKILL)
            assert seen == [1, 2] and time.monotonic() - start < 60
        finally:
            proc.kill()
            proc.wait()
    gx.watch(nn.Linear(3, 2), None, tmp_path / "run", resume=True).close()  # the lock went with it


KILLED = textwrap.dedent("""
    import sys, torch
    from torch import nn
    import gradexplorer as gx
    from gradexplorer.core.runs import write_thread
    write_thread.PERIOD = 3600  # steps 2 and 4 committed together, after step 5, by the flush
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))  # make_model's
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    rec = gx.watch(model, opt, sys.argv[1], stats_every=2)
    for step in range(5):
        opt.zero_grad()
        model(torch.randn(5, 4)).square().mean().backward()
        opt.step()
    rec.writer.flush()
    print("ready", flush=True)
    sys.stdin.read()  # killed here: never closed
""")


def test_a_resumed_run_goes_on_at_the_loops_step_closed_or_killed(tmp_path):
    """``stats_every=2``: the run keeps the step its loop reached (5, not its last recorded
    step 4) with its steps' transactions and at the close, so a resumed run counts the loop's
    steps on (its 6th is step 6) whether the first process closed its recorder or was killed;
    every recorded step's figures those of the loop's step of that number."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with subprocess.Popen([sys.executable, "-c", KILLED, str(tmp_path / "killed")], env=env,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout.readline().strip() == "ready"
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.kill()
            proc.wait()
    with gx.open_run(tmp_path / "killed") as run:
        assert run.steps == [2, 4] and run.meta("loop_step") == 5 and run.meta("finished") is None
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gx.watch(model, opt, tmp_path / "closed", stats_every=2) as rec:
        train(model, opt, 5, rec)
    assert gx.open_run(tmp_path / "closed").meta("loop_step") == 5
    for name in ("killed", "closed"):
        model = make_model()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        with gx.watch(model, opt, tmp_path / name, stats_every=2, resume=True) as rec:
            assert rec.step_count == 5
            norms = []
            for _ in range(5):  # the loop's steps 6..10
                x = torch.randn(5, 4, generator=torch.Generator().manual_seed(len(norms)))
                opt.zero_grad()
                model(x).square().mean().backward()
                norms.append(math.sqrt(math.fsum(float(p.grad.double().square().sum())
                                                 for p in model.parameters())))
                opt.step()
        with gx.open_run(tmp_path / name) as run:
            assert run.steps == [2, 4, 6, 8, 10] and run.meta("loop_step") == 10
            for step in (6, 8, 10):
                assert run.step_info(step)["global_norm"] == pytest.approx(norms[step - 6],
                                                                           rel=1e-12)


def test_complex_parameters_are_measured_over_both_parts(tmp_path):
    class Complex(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(3, 4, dtype=torch.complex64))

        def forward(self, x):
            return (x.to(torch.complex64) @ self.w).abs().sum()

    torch.manual_seed(0)
    model = Complex()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "discards the imaginary part"
        with gx.watch(model, opt, tmp_path / "run", bins=8, snapshot_every=1) as rec:
            opt.zero_grad()
            model(torch.randn(5, 3)).backward()
            grad, weight = model.w.grad.clone(), model.w.detach().clone()
            opt.step()
    s, h = rec.latest().params["w"], rec.latest().histograms["w"]
    parts = torch.view_as_real(grad).double()
    assert s.norm == pytest.approx(parts.norm().item(), rel=1e-6)
    assert s.norm == pytest.approx(grad.abs().double().norm().item(), rel=1e-6)
    assert (s.min, s.max) == (parts.min().item(), parts.max().item())
    assert s.numel == 24 and h.counts.sum() + h.below + h.above == 24
    ratio = (0.1 * grad).abs().double().norm() / weight.abs().double().norm()
    assert s.update_ratio == pytest.approx(ratio.item(), rel=1e-5)
    snap = gx.read_snapshot(tmp_path / "run" / "snapshots" / "step-000001")  # verified on read
    assert torch.equal(snap.gradients()["w"], torch.view_as_real(grad))
    assert snap.stats["w"].norm == s.norm


def test_a_run_that_will_pass_2_gb_says_so_once(tmp_path, monkeypatch):
    from gradexplorer.core.runs import writer as store

    monkeypatch.setattr(store, "WARN_BYTES", 2 * 10**8)  # 0.2 GB: a byte a count, 0.3 MB a step
    big = nn.Sequential(*[nn.Linear(2, 2) for _ in range(40)])  # 80 tensors x 4096 bins
    opt = torch.optim.SGD(big.parameters(), lr=0.0)
    lines = []
    rec = gx.Recorder(big, opt, tmp_path / "big", bins=4096, report=lines.append)
    for _ in range(4):
        opt.zero_grad()
        big(torch.randn(3, 2)).sum().backward()
        opt.step()
    rec.close()
    assert len(lines) == 1 and "passes 0.2 GB at about step" in lines[0], lines
    rate = float(lines[0].split("grows about ")[1].split(" MB")[0])
    size = (tmp_path / "big" / "run.sqlite").stat().st_size
    assert rate == pytest.approx(size / 4 / 1e6, rel=0.5)  # the database's own growth
    small = make_model()
    opt = torch.optim.SGD(small.parameters(), lr=0.1)
    lines.clear()
    rec = gx.Recorder(small, opt, tmp_path / "small", report=lines.append)
    train(small, opt, 4)
    rec.close()
    assert lines == [] and math.isfinite(gx.open_run(tmp_path / "small").figures(4)["0.weight"]["norm"])


def test_framework_callbacks_pass_overwrite_and_resume(tmp_path):
    from gradexplorer.integrations.settings import WatchSettings

    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    WatchSettings(tmp_path / "run").recorder(model, opt).close()
    with pytest.raises(gx.UserError, match="already holds a run"):
        WatchSettings(tmp_path / "run").recorder(model, opt)
    WatchSettings(tmp_path / "run", overwrite=True).recorder(model, opt).close()
    rec = WatchSettings(tmp_path / "run", resume=True).recorder(model, opt)
    assert rec.step_count == 0 and rec.writer.first_step == 1
    rec.close()


def test_resuming_a_run_without_a_later_table_adds_it(tmp_path):
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gx.watch(model, opt, tmp_path / "run") as rec:
        train(model, opt, 2, rec)
    import sqlite3

    db = sqlite3.connect(tmp_path / "run" / "run.sqlite")
    db.execute("DROP TABLE rank_norms")  # as runs written before per-rank figures
    db.commit()
    db.close()
    assert gx.open_run(tmp_path / "run").rank_norms(2) == {}  # read as empty
    with gx.watch(model, opt, tmp_path / "run", resume=True) as rec:
        train(model, opt, 1, rec)
    assert gx.open_run(tmp_path / "run").steps == [1, 2, 3]
