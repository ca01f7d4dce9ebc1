"""At a laptop size the parameter table says which block and which parameter a row is:
GPT-2's ``transformer.h.0.attn.c_attn.weight`` reads ``h.0…c_attn.weight`` (or longer), never
``…h.0.…weight`` (which of the block's weights?) nor ``…c_attn.weight`` (which block?); its
``attn.c_proj`` never ``h.0…c_proj.weight`` (the MLP's reads the same), nor cut."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QStyleOptionViewItem

from tests.gui_helpers import GPT2_SMALL, open_model


def drawn_name(table, row: int) -> str:
    """Row ``row``'s name as the table draws it (its delegate, its cell's width)."""
    index = table.model().index(row, 0)
    option = QStyleOptionViewItem()
    option.initFrom(table)
    option.rect = table.visualRect(index)
    option.widget = table
    table.itemDelegateForColumn(0).initStyleOption(option, index)
    return option.text


@pytest.mark.parametrize("size", [(1024, 700), (921, 630)])  # a window; the app on a 1024×700 screen
def test_gpt2_rows_name_their_block_and_parameter(qtbot, make_window, size):
    window = make_window()
    window.resize(*size)
    window.dock_shares.apply()  # as at a first start at this size (the app opens at 90% of the screen)
    open_model(qtbot, window, GPT2_SMALL, batch_size=2)
    table = window.table
    qtbot.waitUntil(lambda: table.model().rowCount() > 10, timeout=60_000)
    model = table.model()
    checked = 0
    for row in range(model.rowCount()):
        name = model.index(row, 0).data()
        parts = name.split(".")
        if parts[:2] != ["transformer", "h"]:
            continue
        text = drawn_name(table, row)
        if text == name:
            checked += 1
            continue
        block, leaf = f"h.{parts[2]}", ".".join(parts[-2:])
        assert text.lstrip("…").startswith(block + ".") or text.startswith(block + "…"), (name, text)
        assert text.endswith(leaf) and (text.endswith("." + leaf) or text.endswith("…" + leaf)), (name, text)
        checked += 1
    assert checked >= 40
    assert not table.horizontalHeader().isSectionHidden(1)  # beside norm and max |g|
    assert not table.horizontalHeader().isSectionHidden(2)


def test_resnet18_rows_read_whole_on_a_1024x700_screen(qtbot, make_window):
    """ResNet-18's layer1.0.conv1.weight read 'layer1.0…weight' (conv1 or conv2?) three pixels
    short: its name column now gets the style's own text margins, the figure columns no more."""
    window = make_window()
    window.resize(921, 630)  # the app on a 1024×700 screen, at its first start
    window.dock_shares.apply()
    open_model(qtbot, window, "example:resnet18", batch_size=2)
    table, model = window.table, window.table.model()
    names = [model.index(row, 0).data() for row in range(model.rowCount())]
    convs = [row for row, name in enumerate(names) if ".conv" in name]
    assert len(convs) >= 16
    for row in convs:
        assert drawn_name(table, row) == names[row]
    assert not table.horizontalHeader().isSectionHidden(2)


def test_a_row_that_loses_its_gradient_loses_its_tint(qtbot):
    """After Block on a module the rows before it read 'no grad' but kept the last step's
    colour in their name cell: the view was told only the figure columns had changed."""
    from torch import nn

    from gradexplorer.core.stats.records import ParamStats
    from gradexplorer.gui.models.selection import SelectionModel
    from gradexplorer.gui.panels.parameter_table import ParameterTable

    table = ParameterTable(SelectionModel())
    qtbot.addWidget(table)
    table.resize(500, 300)
    table.show()
    qtbot.waitExposed(table)
    model = table.table
    model.set_model(nn.Sequential(nn.Linear(2, 2)))
    norms = (("0.weight", 5.0), ("0.bias", 0.1))
    model.set_stats({n: ParamStats(n, (2,), 2, True, norm=v) for n, v in norms})
    row = model.row_of("0.weight")
    assert model.data(model.index(row, 0), Qt.BackgroundRole) is not None
    repaints = []
    model.dataChanged.connect(lambda tl, br: repaints.append((tl.column(), br.column())))
    model.set_stats({})  # the next step: no gradient reached it
    assert model.data(model.index(row, 0), Qt.BackgroundRole) is None
    assert any(first == 0 for first, _last in repaints)  # the name cell is repainted too


ZOO = f"{Path(__file__).resolve().parent / 'zoo_models.py'}"


@pytest.mark.parametrize("builder", ["t5", "llama"])
def test_transformers_rows_differ_where_their_names_differ(qtbot, make_window, builder):
    """T5's encoder and decoder weights (``q``/``k``/``v``/``o`` of each block) and Llama's
    ``q_proj``/``k_proj``/``v_proj``/``o_proj``, ``gate``/``up``/``down_proj``: at 1024×700 no
    two rows of the table read the same (a name cut on the right of its shortest form read
    ``encoder.block.0.layer.0.Sel…`` for all four of a block's attention weights)."""
    window = make_window()
    window.resize(1024, 700)
    window.dock_shares.apply()
    open_model(qtbot, window, f"{ZOO}:{builder}")
    table, model = window.table, window.table.model()
    qtbot.waitUntil(lambda: model.rowCount() > 10, timeout=60_000)
    names = [model.index(row, 0).data() for row in range(model.rowCount())]
    texts = [drawn_name(table, row) for row in range(len(names))]
    assert len(set(names)) == len(names) >= 20
    clashes = {t: [n for n, u in zip(names, texts, strict=True) if u == t]
               for t in texts if texts.count(t) > 1}
    assert not clashes, clashes
    kinds = ("q.", "k.", "v.", "o.") if builder == "t5" else ("q_proj", "k_proj", "gate_proj", "down_proj")
    for kind in kinds:  # the distinguishing component is read, not cut
        assert any(kind in text for text, name in zip(texts, names, strict=True) if kind in name), kind
