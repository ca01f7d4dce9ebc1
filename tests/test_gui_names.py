"""Names keep their meaning when shortened: whole components dropped from the left, then those
between the block and the parameter (``h.10…c_attn.weight``), the block index
kept, never a cut number; full names in tooltips; tree columns sized to their contents."""

from __future__ import annotations

import re

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontMetrics
from PySide6.QtWidgets import QStyleOptionViewItem
from torch import nn

from gradexplorer.gui.graph.painting import fitted_label
from gradexplorer.gui.models.selection import SelectionModel
from gradexplorer.gui.panels.module_tree import ModuleTree
from gradexplorer.gui.panels.parameter_table import ParameterTable
from gradexplorer.gui.text.name_elide import elide_chars
from tests.gui_helpers import TIMEOUT_MS

GPT_NAME = "transformer.h.10.attn.c_attn.weight"


def test_names_lose_components_from_the_left_and_keep_the_block_index():
    assert elide_chars(GPT_NAME, 40) == GPT_NAME
    assert elide_chars(GPT_NAME, 30) == "…h.10.attn.c_attn.weight"
    assert elide_chars(GPT_NAME, 20) == "h.10…c_attn.weight"  # the block and the parameter
    assert elide_chars(GPT_NAME, 14) == "h.10…weight"
    # no layer between block and parameter: the block's name goes before the layer does
    assert elide_chars("layer1.0.conv1.weight", 18) == "…0.conv1.weight"
    assert elide_chars("layer2.0.shortcut.1.bias", 18) == "…0.shortcut.1.bias"
    assert elide_chars("transformer.h.0.ln_1.weight", 16) == "…h.0.ln_1.weight"
    # the outermost block names the layer (ResNet's layer3, not its downsample.0)
    assert elide_chars("layer3.0.downsample.0.weight", 20) == "layer3.0…weight"
    assert elide_chars("encoder.layers.11.self_attn.out_proj.weight", 26) == "layers.11…out_proj.weight"


@pytest.mark.parametrize("name", [GPT_NAME, "layer4.1.downsample.0.weight", "blocks.1999.lin.bias",
                                  "encoder.layers.11.self_attn.out_proj.weight"])
def test_a_number_is_never_cut(name):
    components = set(name.split("."))
    for chars in range(4, len(name) + 2):
        text = elide_chars(name, chars)
        assert len(text) <= chars or text == "…"
        for number in re.findall(r"\d+", text):
            assert any(number in c for c in components if c.isdigit() or number in c)
        for part in text.replace("…", "").split("."):
            if part.isdigit():
                assert part in components  # a whole block index, not a piece of one


def test_graph_labels_keep_their_figure_whole(qapp):
    metrics = QFontMetrics(QFont())
    label = "transformer.h.10.attn · ‖g‖ 0.0011"
    text = fitted_label(label, metrics, metrics.horizontalAdvance("…h.10.attn · ‖g‖ 0.0011") + 2)
    assert text == "…h.10.attn · ‖g‖ 0.0011"


class Gpt(nn.Module):
    def __init__(self):
        super().__init__()
        blocks = []
        for _ in range(12):
            block = nn.Module()
            block.attn = nn.Module()
            block.attn.c_attn = nn.Linear(2, 2)
            blocks.append(block)
        self.transformer = nn.Module()
        self.transformer.h = nn.ModuleList(blocks)


def test_table_names_are_shortened_by_components_and_tooltips_whole(qtbot):
    table = ParameterTable(SelectionModel())
    qtbot.addWidget(table)
    table.table.set_model(Gpt())
    table.fit_columns()
    row = table.table.row_of(GPT_NAME)
    index = table.proxy.mapFromSource(table.table.index(row, 0))
    option = QStyleOptionViewItem()
    option.initFrom(table)
    option.rect.setWidth(table.fontMetrics().horizontalAdvance("…h.10.attn.c_attn.weight") + 16)
    table.itemDelegateForColumn(0).initStyleOption(option, index)
    assert option.text == "…h.10.attn.c_attn.weight"
    assert table.table.data(table.table.index(row, 0), Qt.ToolTipRole) == GPT_NAME


def test_tree_name_column_fits_its_deepest_row(qtbot):
    tree = ModuleTree(SelectionModel())
    qtbot.addWidget(tree)
    tree.resize(900, 400)
    tree.show()
    tree.set_model(Gpt())
    tree.expandAll()
    qtbot.waitUntil(lambda: tree.columnWidth(0) >= tree.sizeHintForColumn(0), timeout=TIMEOUT_MS)


def test_escape_leaves_the_search_box(qtbot):
    from gradexplorer.gui.graph.panel import GraphPanel

    panel = GraphPanel(SelectionModel())
    qtbot.addWidget(panel)
    panel.show()
    panel.search_edit.setFocus()
    qtbot.waitUntil(panel.search_edit.hasFocus, timeout=TIMEOUT_MS)
    qtbot.keyClicks(panel.search_edit, "fc1")
    qtbot.keyClick(panel.search_edit, Qt.Key_Escape)
    assert panel.search_edit.text() == "" and not panel.search_edit.hasFocus()


def test_every_column_header_says_what_it_shows(qtbot):
    table = ParameterTable(SelectionModel())
    tree = ModuleTree(SelectionModel())
    qtbot.addWidget(table)
    qtbot.addWidget(tree)
    tips = [table.model().headerData(c, Qt.Horizontal, Qt.ToolTipRole)
            for c in range(table.model().columnCount())]
    assert all(tips) and "‖Δθ‖/‖θ‖" in tips[3]
    assert all(tree.headerItem().toolTip(c) for c in range(tree.columnCount()))


def test_hook_column_fits_its_badges(qtbot):
    """The Hook column was sized once, empty: 'block' read 'bl…'."""
    tree = ModuleTree(SelectionModel())
    qtbot.addWidget(tree)
    tree.resize(900, 400)
    tree.show()
    tree.set_model(nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 2)))
    for action in ("block", "observe:capture", "file:/home/someone/hooks/my_hooks.py:halve_grads"):
        tree.set_hooks({"0": action})
        item = tree._items["0"]
        shown = visible_name_in(tree, item, 3)
        assert item.toolTip(3) == action
        if len(action) < 20:
            assert shown == action, (action, shown)
        else:  # a long one is cut, not the column widened past the view
            assert shown.startswith("file:") and tree.columnWidth(3) < 200
    tree.set_hooks({})
    assert tree._items["0"].text(3) == ""


def visible_name_in(tree, item, column: int) -> str:
    """Cell ``column``'s text as the view draws it (elided to its cell less margins and icon)."""
    from PySide6.QtWidgets import QStyle

    rect = tree.visualRect(tree.indexFromItem(item, column))
    margin = tree.style().pixelMetric(QStyle.PM_FocusFrameHMargin, None, tree) + 1
    room = rect.width() - 2 * margin - (tree.iconSize().width() + 4 if not item.icon(column).isNull() else 0)
    return tree.fontMetrics().elidedText(item.text(column), tree.textElideMode(), room)


def test_shortened_names_never_take_a_form_a_sibling_shares():
    """GPT-2's c_attn and c_proj both read ``h.0…weight``, ResNet's layer2.1 and layer3.1 convs
    ``…1.conv2.weight``, T5's encoder and decoder weights the same: a form two names share is
    never shown, and a name that fits none of its own is cut on the right of its shortest."""
    from gradexplorer.core.model.examples.resnet import build_resnet18
    from gradexplorer.gui.text.name_elide import shared_forms
    from tests.zoo_models import gpt2, t5

    for workload in (gpt2(), t5(), build_resnet18({}, 0)):
        names = [name for name, _ in workload.model.named_parameters()]
        shared = shared_forms(names)
        for chars in (12, 16, 20, 24, 30):
            texts = [elide_chars(name, chars, shared) for name in names]
            whole = [t for t in texts if not t.endswith("…")]  # a form of its own, not cut
            assert len(set(whole)) == len(whole), chars
            assert all(t not in shared for t in texts)
    shared = shared_forms(["transformer.h.0.attn.c_attn.weight", "transformer.h.0.attn.c_proj.weight",
                           "transformer.h.0.ln_1.weight"])
    assert elide_chars("transformer.h.0.attn.c_attn.weight", 14, shared) == "h.0…c_attn.we…"
    assert elide_chars("transformer.h.0.attn.c_attn.weight", 18, shared) == "h.0…c_attn.weight"
    resnet = shared_forms(["layer2.1.conv2.weight", "layer3.1.conv2.weight"])
    assert elide_chars("layer3.1.conv2.weight", 18, resnet) == "layer3.1.conv2.we…"
