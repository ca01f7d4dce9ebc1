"""``gradexplorer inspect`` and ``compare`` on run directories written by watch."""

import math

import pytest
import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.cli import main


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    out = []
    for lr in (0.1, 0.2):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 2))
        opt = torch.optim.SGD(model.parameters(), lr=lr)
        with gx.watch(model, opt, root / f"lr{lr}", bins=8):
            for step in range(3):
                x = torch.randn(8, 5, generator=torch.Generator().manual_seed(step))
                opt.zero_grad()
                model(x).square().mean().backward()
                opt.step()
        out.append(root / f"lr{lr}")
    return out


def test_inspect_a_run_shows_the_last_or_a_chosen_step(runs, capsys):
    assert main(["inspect", str(runs[0])]) == 0
    text = capsys.readouterr().out
    run = gx.open_run(runs[0])
    assert "steps 1..3" in text and "step 3:" in text
    norm = run.figures(3)["0.weight"]["norm"]
    assert f"{norm:.4g}" in text
    assert main(["inspect", str(runs[0]), "--step", "2"]) == 0
    assert f"{run.figures(2)['2.bias']['norm']:.4g}" in capsys.readouterr().out


def test_inspect_a_missing_step_is_one_line_exit_2(runs, capsys):
    assert main(["inspect", str(runs[0]), "--step", "9"]) == 2
    err = capsys.readouterr().err
    assert "no step 9" in err and err.count("\n") == 1


def test_compare_two_runs_and_two_steps(runs, capsys):
    assert main(["compare", str(runs[0]), str(runs[1])]) == 0
    text = capsys.readouterr().out
    a, b = gx.open_run(runs[0]).figures(3), gx.open_run(runs[1]).figures(3)
    ratio = b["0.weight"]["norm"] / a["0.weight"]["norm"]
    assert f"{ratio:.4g}" in text
    total = math.sqrt(sum(s["norm"] ** 2 for s in b.values())) / math.sqrt(
        sum(s["norm"] ** 2 for s in a.values()))
    assert f"{total:.4g}" in text
    assert main(["compare", str(runs[0]), "--steps", "1", "3"]) == 0
    text = capsys.readouterr().out
    one = gx.open_run(runs[0])
    ratio = one.figures(3)["2.weight"]["norm"] / one.figures(1)["2.weight"]["norm"]
    assert "step 1" in text and f"{ratio:.4g}" in text


def test_compare_one_run_needs_steps(runs, capsys):
    assert main(["compare", str(runs[0])]) == 2
    assert "--steps" in capsys.readouterr().err
