"""A 1024×700 window is usable: the parameter table and the module tree show the name, norm
and max |g| whole (columns by priority, the rest from the header's menu)."""

from __future__ import annotations

from tests.gui_helpers import GPT2_SMALL, open_model, wait_idle

NAME, NORM, MAX = 0, 1, 2


def test_small_window_shows_name_norm_and_max_g(qtbot, make_window):
    window = make_window()
    window.resize(1024, 700)
    open_model(qtbot, window, "example:resnet18", batch_size=2)
    window.controller.step()
    qtbot.waitUntil(lambda: window.controller.timeline.latest is not None, timeout=60_000)
    wait_idle(qtbot, window)
    table, header = window.table, window.table.horizontalHeader()
    for column in (NAME, NORM, MAX):
        assert not header.isSectionHidden(column)
    visible = [c for c in range(header.count()) if not header.isSectionHidden(c)]
    right = max(header.sectionViewportPosition(c) + header.sectionSize(c) for c in (NORM, MAX))
    assert right <= table.viewport().width()  # both figures in view, no scrolling
    assert header.sectionSize(NAME) >= 100
    metrics, model = table.fontMetrics(), table.model()
    texts = [model.index(row, NORM).data() for row in range(model.rowCount())]
    for column in (NORM, MAX):  # every figure whole: ResNet-18's norms after 3 steps read "0.0003…"
        for text in [*texts, "0.000982", "1.23e-05"]:  # 3-digit figures at their widest
            assert metrics.horizontalAdvance(text) + 8 <= header.sectionSize(column), (column, text)
    assert len(visible) < header.count()  # the rest waits for a wider table...
    hidden = next(c for c in range(header.count()) if header.isSectionHidden(c))
    table.columns.choose(hidden, True)  # ...or the header's menu
    assert not header.isSectionHidden(hidden)
    tree_header = window.tree.header()
    for column in (0, 4, 5):  # module, norm, max |g|
        assert not tree_header.isSectionHidden(column)
    assert tree_header.sectionViewportPosition(5) + tree_header.sectionSize(5) <= \
        window.tree.viewport().width()
    window.selection.select(param="layer3.0.conv1.weight", source="table")  # opens its rows
    item = window.tree._items["layer3.0.conv1"]
    assert item.isSelected() and visible_name(window.tree, item) == "conv1"  # not "c…"
    check_deep_names(window.tree, ["layer2.0.shortcut.0", "layer4.1.conv2", "layer3.0.shortcut"],
                     ["0", "conv2", "shortcut"])  # ResNet-18's deepest rows, names whole


def test_optional_columns_wait_until_names_are_readable(qtbot):
    from gradexplorer.gui.models.selection import SelectionModel
    from gradexplorer.gui.panels.column_priority import NAME_LEAST, NAME_ROOMY
    from gradexplorer.gui.panels.parameter_table import ParameterTable

    table = ParameterTable(SelectionModel())
    qtbot.addWidget(table)
    columns = table.columns
    columns.widths = {0: 220, 1: 70, 2: 70, 3: 70, 4: 70, 5: 90, 6: 60, 7: 50}
    assert columns.shown_columns(NAME_LEAST + 140) == [0, 1, 2]  # narrow: name, norm, max |g|
    assert columns.shown_columns(220 + 140 + 60) == [0, 1, 2]  # the names get room first
    assert columns.shown_columns(220 + 140 + 70) == [0, 1, 2, 4]
    assert NAME_ROOMY >= 220


def visible_name(tree, item) -> str:
    """The name cell's text as the view draws it: elided to its cell less the text margins."""
    from PySide6.QtWidgets import QStyle

    rect = tree.visualRect(tree.indexFromItem(item, 0))
    margin = tree.style().pixelMetric(QStyle.PM_FocusFrameHMargin, None, tree) + 1
    return tree.fontMetrics().elidedText(item.text(0), tree.textElideMode(), rect.width() - 2 * margin)


def expand_to(tree, path: str):
    """Expand the rows down to ``path`` as a click on each arrow would; its item."""
    parts = path.split(".")
    for depth in range(len(parts) + 1):
        item = tree._items[".".join(parts[:depth])]
        item.setExpanded(True)
    return item


def check_deep_names(tree, paths: list[str], whole: list[str]) -> None:
    for path in paths:
        expand_to(tree, path)
    for path in paths:
        item = tree._items[path]
        shown, last = visible_name(tree, item), path.rpartition(".")[2]
        assert shown not in ("", "…") and shown[0] == last[0], (path, shown)  # read from its start
        assert item.toolTip(0) == path  # whole on hover
        if last in whole:
            assert shown == last, (path, shown)
    header = tree.header()
    assert header.sectionViewportPosition(5) + header.sectionSize(5) <= tree.viewport().width()


def test_deep_module_names_stay_readable_at_1024x700(qtbot, make_window):
    """GPT-2's 5-deep rows (transformer.h.0.attn.c_attn) kept 16 pixels of name at Qt's
    indentation: blank. Now the last component shows whole beside norm and max |g|."""
    window = make_window()
    window.resize(1024, 700)
    open_model(qtbot, window, GPT2_SMALL, batch_size=2)
    qtbot.waitUntil(lambda: "transformer.h.3.mlp.c_proj" in window.tree._items, timeout=60_000)
    deep = [f"transformer.h.{i}.{name}" for i in (0, 3) for name in
            ("attn.c_attn", "attn.c_proj", "attn.resid_dropout", "mlp.c_fc", "mlp.dropout", "ln_2")]
    check_deep_names(window.tree, deep, ["c_attn", "c_proj", "c_fc", "dropout", "ln_2"])
    window.selection.select(param="transformer.h.2.mlp.c_fc.weight", source="table")  # from elsewhere
    item = window.tree._items["transformer.h.2.mlp.c_fc"]
    assert item.isSelected() and visible_name(window.tree, item) == "c_fc"
