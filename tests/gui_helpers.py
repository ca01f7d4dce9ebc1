"""Waiting and clicking helpers for the GUI tests (the ``make_window`` fixture is in
conftest.py), and the small runs they open."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.core.model.spec import ModelOptions
from gradexplorer.core.session.engine import SessionConfig

# generous: a wait ends on its event, and this only bounds a failure (under load, on 2 shared
# cores, the first model of a process takes tens of seconds to open)
TIMEOUT_MS = 180_000
# GPT-2 (4 layers, from a config) as a user in the checkout names it, from any working directory
GPT2_SMALL = f"{Path(__file__).resolve().parents[1] / 'examples' / 'gpt2_small.py'}:build"


def wait_idle(qtbot, window, timeout: int = TIMEOUT_MS) -> None:
    """Wait until runs, jobs and layouts have finished and results have been shown."""
    qtbot.waitUntil(lambda: not window.busy(), timeout=timeout)
    window.settle()


def open_model(qtbot, window, spec: str = "example:digits", **options) -> None:
    """Open ``spec`` (batch size 16 unless given) and wait for its graph to be laid out."""
    options.setdefault("batch_size", 16)
    window.controller.open_model(spec, ModelOptions(**options), SessionConfig(device="cpu"))
    qtbot.waitUntil(lambda: window.controller.session.live is not None
                    and window.graph_panel.drawing is not None, timeout=TIMEOUT_MS)
    wait_idle(qtbot, window)


def node_index(drawing, name: str, module: str) -> int:
    """The drawing index of the op ``name`` produced by ``module``."""
    return next(i for i, (label, mod) in enumerate(zip(drawing.labels, drawing.modules, strict=True))
                if label[0] == name and mod == module)


def click_node(qtbot, window, index: int) -> None:
    """Click the graph node ``index`` (zoomed to first)."""
    from PySide6.QtCore import QPointF, Qt

    view = window.graph_panel.view
    x, y = window.graph_panel.drawing.xy[index].tolist()
    view.zoom_to([index])
    pos = view.mapFromScene(QPointF(x, y))
    qtbot.mouseClick(view.viewport(), Qt.LeftButton, pos=pos)


def export(qtbot, window, folder):
    """Export a snapshot now into ``folder`` and wait for it: its path."""
    from gradexplorer.gui.models.session import SnapshotWritten

    with qtbot.waitSignal(window.controller.session.job_finished, timeout=TIMEOUT_MS,
                          check_params_cb=lambda r: isinstance(r, SnapshotWritten)) as blocker:
        window.controller.export_snapshot(str(folder))
    return blocker.args[0].path


def optimizer_curve(window, param: str, module: str, choice: str):
    """The Optimizer tab's curve ``choice`` (a ``choose`` key: "snr", "b_simple_ema", …) of
    ``param`` in ``module``, selected, its tab raised (a hidden tab reads nothing) and redrawn:
    ``(curves, x, y)``."""
    curves = window.forensics.optimizer_curves
    window.forensics.optimizer_dock.raise_()
    window.selection.select(param=param, module=module, source="test")
    curves.choose(choice)
    curves.refresh()
    x, y = curves.curve.getData()
    return curves, x, y


def accumulated_run(path, steps: int, k: int, **watch_options) -> None:
    """A run directory of ``steps`` steps of ``k`` micro-batches of 8 (a small MLP, SGD) recorded
    by ``watch`` (``watch_options``: e.g. ``noise_every``): a noise scale where k ≥ 2."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(1)
    with gx.watch(model, opt, path, bins=16, **watch_options):
        for _ in range(steps):
            x, y = torch.randn(8 * k, 6, generator=g), torch.randn(8 * k, 3, generator=g) + 1
            for part in range(k):
                rows = slice(8 * part, 8 * (part + 1))
                (nn.functional.mse_loss(model(x[rows]), y[rows]) / k).backward()
            opt.step()
            opt.zero_grad()
