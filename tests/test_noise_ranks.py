"""The noise scale under DDP (2 gloo ranks on 127.0.0.1, core/watch/noise_ranks.py): each rank's
own gradient, before DDP's mean, is a small batch. B_simple, tr(Σ), |G|² and the SNR, per
parameter and for the model, equal a float64 computation from every rank's explicit gradients,
taken here with ``torch.autograd.grad`` on each rank's shard (and micro-batch) along the same
training, to 1e-9; with ``noise_every`` (2, 3 with ``stats_every=2``, "auto" on a made-up clock
that differs between the ranks) on the steps the cadence gives, the same on every rank; runs
resumed in their run_dir (``resume=True``: only rank 0 reads the step the loop reached and the
cadence's last step) going on from them on every rank."""

import math
import multiprocessing
import time

import pytest
import torch
import torch.multiprocessing as mp
from distributed_helpers import make_model
from noise_ranks_helpers import AUTO_CHANGES, CONFIGS, STEPS, B, data, micro_batch, rows_of, worker
from tensor_parallel_checks import free_port
from torch import nn

import gradexplorer as gx
from gradexplorer.core.runs.noise_rows import noise_params, noise_rows
from gradexplorer.core.watch.noise_ranks import RankCadence

WORLD = 2
HANG = 600  # s: the ranks still running then hang (a rank reducing alone): killed, the test fails
# what the tensor-parallel tests' ranks import too: one forkserver serves a pytest process
PRELOAD = ["torch", "torch.distributed.tensor.parallel", "torch.distributed.fsdp", "gradexplorer",
           "gradexplorer.core.watch.sharded_probe", "tensor_parallel_helpers",
           "noise_ranks_helpers"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("ddp")
    multiprocessing.set_forkserver_preload(PRELOAD)
    # "unsynced": a step all under no_sync has no figures, one line, and leaves nothing behind
    # (asserted in the ranks)
    ranks = mp.start_processes(worker, args=(WORLD, str(root), free_port(), [*CONFIGS, "unsynced"]),
                               nprocs=WORLD, join=False, start_method="forkserver")
    end = time.monotonic() + HANG
    while not ranks.join(timeout=5):
        if time.monotonic() > end:
            for process in ranks.processes:
                process.kill()
            pytest.fail(f"the ranks did not finish in {HANG} s (a rank waiting in a reduce)")
    return root


def expected(name):
    """Per recorded step: ``{parameter: (mean |g|², |G|², |G|²_est, tr(Σ)_est)}`` from each
    (rank, micro-batch)'s own gradient of its mean loss, the training replayed in one process
    (DDP's step: the mean of those gradients)."""
    m, *_, steps = CONFIGS[name]
    rows = rows_of(name)
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    names, params = zip(*model.named_parameters(), strict=True)
    out, k = {}, WORLD * m
    for step in range(steps):
        x, y = data(step, WORLD, m)
        grads = [torch.autograd.grad(nn.functional.mse_loss(model(xs), ys), params)
                 for r in range(WORLD) for i in range(m)
                 for xs, ys in [micro_batch(x, y, r, i, m)]]
        per = {}
        for j, n in enumerate(names):
            g = torch.stack([each[j] for each in grads]).flatten(1)  # (k, numel), float64
            mean = g.mean(0)
            variance = float((g - mean).pow(2).sum()) / (k - 1)  # Σ|g_i − G|²/(k − 1)
            big = float(mean.pow(2).sum())
            # tr(Σ) = b · that variance; |G|² unbiased: |G_big|² less the noise's share
            per[n] = (float(g.pow(2).sum(1).mean()), big, big - variance / k, B * variance)
        if step + 1 in rows:
            out[step + 1] = per
        opt.zero_grad()
        for p, j in zip(params, range(len(params)), strict=True):
            p.grad = torch.stack([each[j] for each in grads]).mean(0)
        opt.step()
    return out


@pytest.mark.parametrize("name", list(CONFIGS))
def test_rank_noise_scale_equals_float64_from_each_ranks_gradients(name, runs):
    m = CONFIGS[name][0]
    want = expected(name)
    run = gx.open_run(runs / name)
    rows = noise_rows(run)
    assert [r["step"] for r in rows] == list(want)
    for row in rows:
        ref = want[row["step"]]
        assert (row["parts"], row["batch_small"], row["ranks"]) == (WORLD * m, B, WORLD)
        assert row["source"] == ("ranks" if m == 1 else "both")
        assert row["loss_divisor"] == m  # each micro-batch's loss over m, as the loop divides it
        stored = noise_params(run, row["step"])
        assert list(stored) == list(ref)
        for n, (small, big, g_sq, trace) in ref.items():
            got = stored[n]
            for field, value in (("g_small_sq", small), ("g_big_sq", big), ("g_sq", g_sq),
                                 ("trace", trace), ("snr", g_sq * B / trace)):
                assert got[field] == pytest.approx(value, rel=1e-9, abs=0), (row["step"], n, field)
        # the local gradients, not DDP's mean: read after the all-reduce, every rank's |g|²
        # would be |G_big|²-like and tr(Σ) would vanish
        assert row["g_small_sq"] > 1.2 * row["g_big_sq"]
        small, big, g_sq, trace = (math.fsum(v[i] for v in ref.values()) for i in range(4))
        assert row["g_small_sq"] == pytest.approx(small, rel=1e-9)
        assert row["g_big_sq"] == pytest.approx(big, rel=1e-9)
        assert row["g_sq"] == pytest.approx(g_sq, rel=1e-9)
        assert row["trace"] == pytest.approx(trace, rel=1e-9)
        assert row["b_simple"] == pytest.approx(trace / g_sq, rel=1e-9)


def test_inspect_and_the_report_say_the_estimate_comes_from_ranks(runs, capsys, tmp_path):
    from gradexplorer.cli import main
    from gradexplorer.core.share.report_html import write_report

    assert main(["inspect", str(runs / "both")]) == 0
    out = capsys.readouterr().out
    assert f"noise scale: {WORLD} ranks × 2 micro-batches of {B}: B_simple" in out
    assert f"(batch now {WORLD * 2 * B})" in out and "SNR" in out
    assert main(["inspect", str(runs / "ranks")]) == 0
    assert f"noise scale: {WORLD} ranks of {B}: B_simple" in capsys.readouterr().out
    write_report(gx.open_run(runs / "both"), tmp_path / "report.html")
    html = (tmp_path / "report.html").read_text()
    assert f"steps of {WORLD} ranks × 2 micro-batches of {B}" in html


def test_settings_inspect_and_the_report_say_the_ranks_cadence(runs, capsys, tmp_path):
    from gradexplorer.cli import main
    from gradexplorer.core.share.report_html import write_report

    auto = gx.open_run(runs / "auto")
    assert auto.settings["noise_every"] == "auto" and auto.settings["noise_cadence"] == AUTO_CHANGES
    assert gx.open_run(runs / "noise2").settings["noise_every"] == 2
    said = "noise scale on one step in 6 (auto, for ≤ 5% of the step; the EMAs over those steps: " \
           "6 from step 13)"
    assert main(["inspect", str(runs / "auto"), "--step", "19"]) == 0
    out = capsys.readouterr().out
    assert f"noise scale: {WORLD} ranks × 2 micro-batches of {B}: B_simple" in out and said in out
    assert main(["inspect", str(runs / "auto"), "--step", "17"]) == 0
    assert f"noise scale: none at this step; {said}; the last at step 13 (`--step 13`)" in \
        capsys.readouterr().out
    assert main(["inspect", str(runs / "noise2"), "--step", "3"]) == 0
    assert "noise scale on one step in 2 (the EMAs over those steps)" in capsys.readouterr().out
    write_report(auto, tmp_path / "report.html")
    assert said in (tmp_path / "report.html").read_text()


def test_a_ranks_auto_change_is_a_proposal_until_the_ranks_adopt_the_largest():
    clock = [0.0]
    cadence = RankCadence("auto", clock=lambda: clock[0])
    for step in range(1, 13):  # the capture 11% of a 10 ms step: alone it would take 4
        clock[0] += 0.010 + (0.0011 if cadence.now else 0.0)
        cadence.close(step)  # proposed at step 11's close, kept over step 12 (no capture)
    assert (cadence.every, cadence.proposal, cadence.changes) == (2, 4, [])
    cadence.adopt(13, 6)  # another rank's 6: the largest
    assert (cadence.every, cadence.proposal, cadence.changes) == (6, 6, [[13, 6]])
    assert not cadence.close(13) and cadence.proposal == 6  # held (16 steps): none proposed
    fixed = RankCadence(3)
    fixed.adopt(1, 6)
    assert (fixed.every, fixed.changes) == (3, [])


def test_the_app_shows_a_ddp_runs_snr(runs, qtbot, make_window):
    from gradexplorer.gui.panels.parameter_table import SNR
    from gradexplorer.gui.text.number_text import format_number
    from tests.gui_helpers import TIMEOUT_MS

    stored = {n: p["snr"] for n, p in noise_params(gx.open_run(runs / "ranks"), STEPS).items()}
    window = make_window()
    view, table = window.table, window.table.table
    assert window.file_actions.open_run(str(runs / "ranks")) is not None
    qtbot.waitUntil(lambda: not view.isColumnHidden(SNR), timeout=TIMEOUT_MS)
    shown = {table.rows[r][0]: table.data(table.index(r, SNR)) for r in range(table.rowCount())}
    assert shown == {n: format_number(v, 3) for n, v in stored.items()}
