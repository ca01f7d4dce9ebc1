"""The status bar's loss of an opened run: a run whose loop never gave watch a loss says
"loss —" (no figure), a NaN loss says "loss nan" (a figure): never one shown as the other."""

from __future__ import annotations

import math

import torch
from torch import nn

import gradexplorer as gx
from tests.gui_helpers import TIMEOUT_MS

STEPS = 3


def watched(path, loss_given) -> None:
    """A small loop under watch; ``loss_given(step, loss)`` the loss watch is told, or None."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gx.watch(model, opt, path) as rec:
        for step in range(STEPS):
            loss = nn.functional.mse_loss(model(torch.randn(16, 4)), torch.randn(16, 1))
            told = loss_given(step, loss)
            if told is not None:
                rec.note_loss(told)
            opt.zero_grad()
            loss.backward()
            opt.step()


def shown_loss(qtbot, make_window, path) -> str:
    window = make_window()
    assert window.file_actions.open_run(str(path)) is not None
    timeline = window.controller.timeline
    qtbot.waitUntil(lambda: timeline.latest is not None and timeline.latest.step == STEPS,
                    timeout=TIMEOUT_MS)
    window.statusBar().show_latest()
    return window.statusBar().loss_label.text()


def test_a_run_without_a_loss_says_so(qtbot, make_window, tmp_path):
    watched(tmp_path / "run", lambda step, loss: None)
    assert shown_loss(qtbot, make_window, tmp_path / "run") == "loss —"


def test_a_nan_loss_is_a_figure(qtbot, make_window, tmp_path):
    watched(tmp_path / "run", lambda step, loss: math.nan if step == STEPS - 1 else loss.item())
    assert shown_loss(qtbot, make_window, tmp_path / "run") == "loss nan"
