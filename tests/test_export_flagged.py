"""``export --stride K`` never thins away a flagged step: a spike event's step, a NaN/Inf step,
a step the GradScaler skipped are exported whatever the stride, and stdout says which."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from spike_helpers import train
from torch import nn

import gradexplorer as gx
from gradexplorer.core.runs.history import RunHistory
from tests.test_export import tensorboard_reader

INJECT = 120  # the spike's step; with --stride 10 the kept steps are 1, 11, …, 111, 121, …


@pytest.fixture(scope="module")
def spiked(tmp_path_factory):
    path = tmp_path_factory.mktemp("flagged") / "spiked"
    train(path, 160, inject=INJECT)
    assert [e.step for e in gx.open_run(path).spike_events()] == [INJECT]
    return path


def test_stride_keeps_the_spike_step_in_csv_and_tensorboard(spiked, tmp_path, run_cli):
    strided = list(range(1, 161, 10)) + [160]
    code, out, err = run_cli("export", spiked, "--to", "csv", tmp_path / "s.csv", "--stride", "10")
    assert code == 0, err
    assert f"also kept 1 flagged step(s) it would skip: {INJECT} (spike)" in out
    df = pd.read_csv(tmp_path / "s.csv")
    assert sorted(set(df.step)) == sorted([*strided, INJECT])
    norm = df[(df.step == INJECT) & (df.parameter == "side.weight") & (df.figure == "norm")].value
    assert norm.tolist() == [gx.open_run(spiked).figures(INJECT)["side.weight"]["norm"]]  # exact

    code, out, err = run_cli("export", spiked, "--to", "tensorboard", tmp_path / "tb", "--stride", "10",
                             "--params", "side.*", "--figures", "norm")
    assert code == 0, err
    assert f"{INJECT} (spike)" in out
    acc = tensorboard_reader(tmp_path / "tb" / "spiked")
    assert [e.step for e in acc.Histograms("grad/side.weight")] == sorted([*strided, INJECT])
    assert INJECT in [e.step for e in acc.Scalars("norm/side.weight")]


def test_stride_keeps_nan_and_skipped_steps(tmp_path, run_cli):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    with gx.watch(model, opt, tmp_path / "run", scaler=scaler):
        for step in range(1, 9):
            x = torch.randn(16, 4, generator=torch.Generator().manual_seed(step))
            if step == 6:
                x[0, 0] = float("inf")  # the scaler finds Inf gradients and skips this step
            scaler.scale(model(x).square().mean()).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
    run = gx.open_run(tmp_path / "run")
    assert run.step_ledger(6).skipped
    # a NaN step is a spike event too
    assert RunHistory(run).flagged_steps() == {6: ["spike", "NaN/Inf", "skipped"]}
    code, out, err = run_cli("export", tmp_path / "run", "--to", "csv", tmp_path / "r.csv",
                             "--stride", "4")
    assert code == 0, err
    assert "also kept 1 flagged step(s) it would skip: 6 (spike, NaN/Inf, skipped)" in out
    assert sorted(set(pd.read_csv(tmp_path / "r.csv").step)) == [1, 5, 6, 8]


def test_a_stride_with_nothing_flagged_says_so(tmp_path, run_cli):
    from tests.share_helpers import write_run

    path = write_run(tmp_path / "clean", steps=6)
    code, out, err = run_cli("export", path, "--to", "csv", tmp_path / "c.csv", "--stride", "2")
    assert code == 0, err
    assert "--stride 2: no flagged step" in out
    assert sorted(set(pd.read_csv(tmp_path / "c.csv").step)) == [1, 3, 5, 6]
