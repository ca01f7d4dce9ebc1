"""The Model dock's module tree on an opened run (issue 43.5): its rows answer their names, types,
counts, figures, tints and sort keys when a view asks (no per-cell setters per step), so what
it shows must follow the step on show — texts, float64 figures, the sort order re-applied and
the selection both ways."""

from __future__ import annotations

import math

import pytest
import torch
from PySide6.QtCore import Qt
from torch import nn

import gradexplorer as gx
from gradexplorer.gui.panels.parameter_table import TINTED_TEXT

SORT_ROLE = Qt.UserRole + 1
WEIGHTS = {1: (3.0, 2.0, 1.0), 2: (1.0, 1.0, 1.0), 3: (1.0, 2.0, 30.0)}  # ranking flips by step 3


class Blocks(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(4, 3) for _ in range(3))
        self.head = nn.Linear(3, 1, bias=False)

    def forward(self, x: torch.Tensor, weights) -> torch.Tensor:
        return sum(w * self.head(block(x)).sum() for w, block in zip(weights, self.blocks, strict=True))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """``(run_dir, {step: {param: float64 gradient}})``."""
    path = tmp_path_factory.mktemp("tree") / "run"
    torch.manual_seed(0)
    model = Blocks()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    grads = {}
    with gx.watch(model, opt, path, bins=8) as rec:
        for step, weights in WEIGHTS.items():
            loss = model(torch.randn(5, 4), weights)
            opt.zero_grad()
            loss.backward()
            rec.note_loss(loss)
            grads[step] = {n: p.grad.detach().double().clone() for n, p in model.named_parameters()}
            opt.step()
    return path, grads


def module_norm(grads: dict, path: str) -> float:
    inside = [g for n, g in grads.items() if not path or n.startswith(path + ".")]
    return math.sqrt(math.fsum(float((g * g).sum()) for g in inside))


def children_by_norm(tree, parent: str) -> list[str]:
    item = tree._items[parent]
    return [item.child(i).data(0, Qt.UserRole) for i in range(item.childCount())]


def test_the_tree_of_an_opened_run_shows_and_sorts_the_step_on_show(qtbot, make_window, run):
    path, grads = run
    window = make_window()
    assert window.file_actions.open_run(str(path)) is not None
    tree = window.tree
    assert list(tree._items) == ["", "blocks", "blocks.0", "blocks.1", "blocks.2", "head"]
    row = tree._items["blocks.1"]
    assert [row.text(c) for c in range(3)] == ["1", "Linear", "15"]
    assert row.toolTip(0) == "blocks.1" and tree._items[""].text(0) == "(model)"
    assert tree._items["blocks"].text(1) == "ModuleList" and tree._items["blocks"].text(2) == "45"
    assert tree._items[""].toolTip(0) == "the whole model" and tree._items[""].text(2) == "48"

    def figures_follow(step: int) -> None:
        for module in tree._items:
            norm = module_norm(grads[step], module)
            assert tree._items[module].text(4) == f"{norm:.3g}", (step, module)
            assert tree._items[module].data(4, SORT_ROLE) == pytest.approx(norm, rel=1e-12)
            assert tree._items[module].text(7) == "ok"
        expected = sorted(["blocks.0", "blocks.1", "blocks.2"],
                          key=lambda m: module_norm(grads[step], m), reverse=True)
        assert children_by_norm(tree, "blocks") == expected, step

    tree.sortByColumn(4, Qt.DescendingOrder)  # the user sorts by norm, at the newest step
    figures_follow(3)
    assert children_by_norm(tree, "blocks")[0] == "blocks.2"
    tints = {m: tree._items[m].background(4).color().name() for m in ("blocks.0", "blocks.2")}
    assert tints["blocks.0"] != tints["blocks.2"]  # a heat by norm, answered by the row
    assert tree._items["blocks.2"].foreground(0).color().name() == TINTED_TEXT  # dark on the tint

    window.selection.select(step=1, source="test")  # an older step: every row's figures follow
    window.settle()
    figures_follow(1)
    assert children_by_norm(tree, "blocks")[0] == "blocks.0"  # sorted again by step 1's norms

    window.table.selectRow(window.table.proxy.mapFromSource(  # the table selects a parameter:
        window.table.table.index(window.table.table.row_of("blocks.1.bias"), 0)).row())
    assert tree.currentItem() is tree._items["blocks.1"]  # its module is the tree's current row
    tree.setCurrentItem(tree._items["head"])  # and a row clicked selects its module everywhere
    assert window.selection.current.module == "head"
