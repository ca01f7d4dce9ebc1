"""A 1024×700 window is usable: the parameter table and the module tree show the name, norm
and max |g| whole in view, and every other column a sideways scroll away (the header's menu
hides or shows any)."""

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
    right = header.sectionViewportPosition(NORM) + header.sectionSize(NORM)
    assert right <= table.viewport().width()  # the norm in view beside names that read apart
    left = header.sectionViewportPosition(MAX)  # max |g| whole in view, or wholly beyond it:
    assert left + header.sectionSize(MAX) <= table.viewport().width() or left >= table.viewport().width()
    # (half a figure reads as another number: "0.13" for 0.132)
    assert header.sectionSize(NAME) >= 100
    metrics, model = table.fontMetrics(), table.model()
    texts = [model.index(row, NORM).data() for row in range(model.rowCount())]
    for column in (NORM, MAX):  # every figure whole: ResNet-18's norms after 3 steps read "0.0003…"
        for text in [*texts, "0.000982", "1.23e-05"]:  # 3-digit figures at their widest
            assert metrics.horizontalAdvance(text) + 8 <= header.sectionSize(column), (column, text)
    assert set(visible) == set(table.columns.priority)  # every column, the optimizer's aside...
    reachable(qtbot, table, header)  # ...a sideways scroll away (it was hidden by width: unreachable)
    table.columns.choose(4, False)  # the header's menu hides one...
    assert header.isSectionHidden(4)
    table.columns.choose(4, True)  # ...and shows it again
    assert not header.isSectionHidden(4)
    shown = displayed_names(table)
    assert len(set(shown.values())) == len(shown)  # every name tells its parameter apart...
    for block in ("layer2.1", "layer3.1", "layer4.1"):  # ...its layer's index readable
        assert block in shown[f"{block}.conv2.weight"], shown[f"{block}.conv2.weight"]
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


def reachable(qtbot, view, header) -> None:
    """The view scrolls sideways far enough to show its last column whole."""
    shown = [c for c in range(header.count()) if not header.isSectionHidden(c)]
    total = sum(header.sectionSize(c) for c in shown)
    bar = view.horizontalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() + view.viewport().width() >= total - 1, timeout=5_000)


def test_hook_column_stays_on_show_when_a_hook_is_attached(qtbot, make_window):
    """At 1024 wide a badge widened the Hook column past what the tree's width allowed, and the
    column was hidden: the hook just attached could not be seen."""
    window = make_window()
    window.resize(1024, 700)
    open_model(qtbot, window, GPT2_SMALL, batch_size=2)
    tree = window.tree
    header = tree.header()
    assert not header.isSectionHidden(3)
    tree.set_hooks({"transformer.h.0.attn": "file:/home/someone/hooks/my_hooks.py:halve_grads"})
    assert not header.isSectionHidden(3) and header.sectionSize(3) > 40
    assert [c for c in range(header.count()) if header.isSectionHidden(c)] == []
    reachable(qtbot, tree, header)
    shown = displayed_names(window.table)  # the name column as wide as the Model dock allows
    assert len(set(shown.values())) == len(shown)
    for block in range(4):
        attn, proj = (shown[f"transformer.h.{block}.attn.{layer}.weight"] for layer in ("c_attn", "c_proj"))
        assert f"h.{block}" in attn and "c_attn" in attn and "c_proj" in proj, (attn, proj)


def displayed_names(table) -> dict[str, str]:
    """Each parameter's name as the table's name column draws it now."""
    from PySide6.QtCore import QRect
    from PySide6.QtWidgets import QStyleOptionViewItem

    delegate, model, texts = table.itemDelegateForColumn(0), table.model(), {}
    for row in range(model.rowCount()):
        index = model.index(row, 0)
        option = QStyleOptionViewItem()
        option.initFrom(table)
        option.rect = QRect(0, 0, table.columnWidth(0), 20)
        delegate.initStyleOption(option, index)
        texts[index.data()] = option.text
    return texts


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
