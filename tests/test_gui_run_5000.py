"""A run of 5,000 parameters (issue 22.12) opens in the app with every figure right (how fast:
bench/open_run.py), its graph after the figures, and the app exits without a Qt warning."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from PySide6.QtCore import Qt
from torch import nn

import gradexplorer as gx
from gradexplorer.gui.text.number_text import format_number
from tests.gui_helpers import TIMEOUT_MS
from tests.screenshot_helpers import run_gradexplorer
from tests.stats_reference import reference

BLOCKS = 2500  # Linear(2, 1): a weight and a bias each, 5,000 parameters
STEPS = 3


class ManySmall(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(2, 1) for _ in range(BLOCKS))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([block(x) for block in self.blocks]).mean(0)


@pytest.fixture(scope="module")
def big_run(tmp_path_factory):
    """``(run_dir, last step's gradients in float64, noted losses)``."""
    path = tmp_path_factory.mktemp("big") / "run"
    torch.manual_seed(0)
    model = ManySmall()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses, grads = [], {}
    with gx.watch(model, opt, path, bins=8) as rec:
        for _ in range(STEPS):
            loss = model(torch.randn(8, 2)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            rec.note_loss(loss)
            losses.append(loss.item())
            grads = {n: p.grad.detach().double().numpy().copy() for n, p in model.named_parameters()}
            opt.step()
    return path, grads, losses


def test_a_run_of_5000_parameters_opens_with_its_figures(qtbot, make_window, big_run):
    path, grads, losses = big_run
    window = make_window()
    follower = window.file_actions.open_run(str(path))
    assert follower is not None
    window.repaint()  # the figures are there when the open returns: no event processed
    table = window.table.table
    names = [row[0] for row in table.rows]
    assert names == list(grads) and len(names) == 2 * BLOCKS
    norms = {n: reference(g)["norm"] for n, g in grads.items()}
    for row in (0, 1, 2, 777, 2 * BLOCKS - 2, 2 * BLOCKS - 1):
        name = names[row]
        assert table.data(table.index(row, 1), Qt.UserRole) == pytest.approx(norms[name], rel=1e-12)
        assert table.data(table.index(row, 2), Qt.UserRole) == pytest.approx(
            float(np.abs(grads[name]).max()), rel=1e-12)
        assert table.data(table.index(row, 1)) == format_number(norms[name], 3)
    whole = math.sqrt(math.fsum(v * v for v in norms.values()))
    root = window.tree.topLevelItem(0)
    assert root.childCount() == 1 and root.child(0).childCount() == BLOCKS
    assert root.data(4, Qt.UserRole + 1) == pytest.approx(whole, rel=1e-12)
    block = root.child(0).child(BLOCKS - 1)  # blocks.2499: its weight and bias together
    assert block.data(4, Qt.UserRole + 1) == pytest.approx(math.hypot(
        norms[f"blocks.{BLOCKS - 1}.weight"], norms[f"blocks.{BLOCKS - 1}.bias"]), rel=1e-12)
    steps, shown = window.curves.loss_item.getData()
    assert list(steps) == list(range(1, STEPS + 1)) and list(shown) == pytest.approx(losses, rel=1e-12)
    steps, shown = window.curves.norm_item.getData()
    assert list(steps) == list(range(1, STEPS + 1)) and shown[-1] == pytest.approx(whole, rel=1e-12)
    flow = window.gradients.flow  # a row's tooltip, written when hovered
    assert len(flow.shown) == 2 * BLOCKS
    last = flow.shown.index(names[-1])
    assert flow.tip(last) == (f"{names[-1]}\nmax |g| {float(np.abs(grads[names[-1]]).max()):.4g} · "
                              f"rms {norms[names[-1]] / math.sqrt(grads[names[-1]].size):.4g}")
    assert flow.tip(2 * BLOCKS) == ""
    assert window.graph_panel.drawing is None  # the graph comes after the figures
    qtbot.waitUntil(lambda: window.graph_panel.drawing is not None and not window.busy(),
                    timeout=TIMEOUT_MS)
    params = {d.get("param") for _, d in window.graph_panel.graph.nodes(data=True)}
    assert {names[0], names[-1]} <= params


def test_the_app_showing_a_big_run_exits_without_a_qt_warning(tmp_path, big_run):
    path, _, _ = big_run
    done = run_gradexplorer("open", str(path), "--screenshot", str(tmp_path / "big.png"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "big.png").stat().st_size > 0
    noise = [line for line in done.stderr.splitlines()
             if line.strip() and "propagateSizeHints" not in line]  # the offscreen platform's
    assert not noise, noise[:5]
