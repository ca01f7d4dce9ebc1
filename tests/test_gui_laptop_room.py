"""At 1024×700 with three runs overlaid every plot keeps a readable height and every short text
reads whole: the Training dock's plots were 29 pixels tall under two keys of three lines each,
the graph toolbar read "22 nodes · l…", the Gradients header "…weight" and the tiles' count
"148 …"."""

from __future__ import annotations

import re
import warnings

import pyqtgraph as pg
import pytest
import torch
from PySide6.QtCore import QRect
from torch import nn

from tests.test_gui_steady_layout import global_rect, keys_and_data, laid_out

READABLE = 120  # pixels of plot area
NAME = "transformer.h.0.attn.c_attn.weight"


class Block(nn.Module):
    """GPT-2's names (attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj, ln_1) at a tiny size."""

    def __init__(self) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(4)
        self.attn = nn.Module()
        self.attn.c_attn, self.attn.c_proj = nn.Linear(4, 4), nn.Linear(4, 4)
        self.mlp = nn.Module()
        self.mlp.c_fc, self.mlp.c_proj = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        x = x + self.attn.c_proj(torch.tanh(self.attn.c_attn(self.ln_1(x))))
        return x + self.mlp.c_proj(torch.tanh(self.mlp.c_fc(x)))


def gpt_like_run(path, lr: float, max_norm: float, blocks: int = 15):
    """A 15-block model (150 parameters) under watch, its gradients clipped: the keys name
    the norm as accumulated and as applied."""
    import gradexplorer as gx

    torch.manual_seed(0)
    model = nn.Module()
    model.transformer = nn.Module()
    model.transformer.h = nn.Sequential(*(Block() for _ in range(blocks)))
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    with warnings.catch_warnings(), gx.watch(model, opt, path, bins=8) as rec:
        for step in range(6):
            x = torch.randn(8, 4, generator=torch.Generator().manual_seed(step))
            opt.zero_grad()
            loss = model.transformer.h(x).square().mean() * 50
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            rec.note_loss(loss)
            opt.step()
    return path


def shown_height(item, view) -> int:
    """The height of ``item`` (a view box) the person sees: within its view and every
    scroll area around it."""
    box = global_rect(item, view)
    widget = view.parentWidget()
    while widget is not None:
        box = box.intersected(QRect(widget.mapToGlobal(widget.rect().topLeft()), widget.size()))
        widget = widget.parentWidget()
    return box.height()


def behind_a_tab(window, view) -> bool:
    """Whether ``view`` lies in a dock whose tab is not the current one of its group."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QDockWidget, QTabBar

    dock = view.parentWidget()
    while dock is not None and not isinstance(dock, QDockWidget):
        dock = dock.parentWidget()
    if dock is None:
        return False
    for bar in window.findChildren(QTabBar, options=Qt.FindDirectChildrenOnly):
        titles = [bar.tabText(i) for i in range(bar.count())]
        title = dock.windowTitle()
        if bar.isVisible() and title in titles and titles.index(title) != bar.currentIndex():
            return True
    return False


def plot_views(window) -> list:
    """The window's plots on show (not in a dock behind another's tab)."""
    return [v for v in window.findChildren(pg.GraphicsView)
            if v.isVisible() and v.scene() is not None and not behind_a_tab(window, v)]


def view_boxes(view):
    """The data areas of ``view``'s plots (not a colour bar's)."""
    return [i for i in view.scene().items() if isinstance(i, pg.ViewBox) and i.isVisible() and i.width() > 30]


@pytest.fixture(scope="module")
def gpt_like_runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("runs")
    return [gpt_like_run(folder / name, lr, clip)
            for name, lr, clip in (("lr-1e-4", 1e-4, 0.5), ("lr-3e-4", 3e-4, 0.4), ("lr-1e-3", 1e-3, 0.3))]


@pytest.mark.parametrize("size", [(1024, 700), (1600, 1000)])
def test_plots_readable_and_texts_whole(qtbot, make_window, gpt_like_runs, size):
    runs = gpt_like_runs
    window = make_window()
    window.resize(*size)
    assert window.file_actions.open_run(str(runs[0])) is not None
    for path in runs[1:]:
        assert window.run_compare.add_run(path) is not None
    window.selection.select(param=NAME, module=NAME.rpartition(".")[0], source="test")
    laid_out(qtbot, window)
    curves = window.curves
    assert curves.loss_lines.names() == ["lr-1e-4", "lr-3e-4", "lr-1e-3"]
    assert "applied" in curves.norm_lines.names()  # the key names the clipped norm too
    gradients = window.gradients.scroll
    seen = []
    for view in plot_views(window):
        for box in view_boxes(view):  # the Gradients dock scrolls its plots, 80+ pixels each
            least = 80 if gradients.isAncestorOf(view) else READABLE
            seen.append(type(view).__name__)
            assert shown_height(box, view) >= least, (type(view).__name__, shown_height(box, view))
    assert len(seen) >= 6, seen  # the Training dock's two, the Runs dock's, the Gradients dock's
    for plot in (curves.loss_plot, curves.norm_plot):  # whole, their step axis too
        assert plot.vb.height() >= READABLE and curves.scroll.verticalScrollBar().maximum() == 0
    forensics = window.forensics
    forensics.bring_forward(forensics.optimizer_dock)  # a tab of the same bottom group
    laid_out(qtbot, window)
    boxes = list(view_boxes(forensics.optimizer_curves.findChild(pg.GraphicsView)))
    assert boxes and all(shown_height(b, b.scene().views()[0]) >= READABLE for b in boxes)
    window.curves_dock.raise_()
    laid_out(qtbot, window)
    keys, data = keys_and_data(window)  # (those in a dock behind another's tab are not seen)
    keys = [(key, holder) for key, holder in keys if not behind_a_tab(window, holder)]
    data = [(box, view) for box, view in data if not behind_a_tab(window, view)]
    assert len(keys) >= 2 and len(data) >= 5
    for key, holder in keys:
        for box, view in data:
            assert not key.intersects(box), (key, holder, box, view.parent())
    busy = window.graph_panel.busy_label
    assert re.fullmatch(r"[\d,]+ nodes · [\d.]+ s", busy.text())
    assert busy.isVisible() and busy.width() >= \
        busy.fontMetrics().horizontalAdvance(busy.text())  # whole, not behind the toolbar's »
    assert "laid out in" in busy.toolTip()
    header = window.gradients.param_label
    assert header.name == NAME and header.text() == f"<b>{NAME}</b>"  # whole, never "…weight"
    window.distributions_dock.raise_()
    laid_out(qtbot, window)
    count = window.distributions.grid.count
    assert count.text() == "150 of 150 · lr-1e-4" and count.shown() == count.text()


def test_the_runs_plot_shows_what_the_gradients_dock_shows(qtbot, make_window, gpt_like_runs):
    """With nothing selected the Gradients dock shows the model's first parameter, and the Runs
    dock beside it said "select a parameter" over an empty plot."""
    window = make_window()
    window.resize(1024, 700)
    assert window.file_actions.open_run(str(gpt_like_runs[0])) is not None
    assert window.run_compare.add_run(gpt_like_runs[1]) is not None
    laid_out(qtbot, window)
    panel = window.run_compare.runs_panel
    panel.refresh()
    first = "transformer.h.0.ln_1.weight"
    assert window.selection.current.param is None and window.gradients.param == first
    assert "over steps" in panel.plot.plotItem.titleLabel.text
    drawn = [item for item in panel.lines.items if item.isVisible()]
    assert len(drawn) == 2 and all(len(item.xData) == 6 for item in drawn)  # both runs' six steps
