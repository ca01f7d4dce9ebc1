"""A 1024×700 window is usable: the parameter table and the module tree show the name, norm
and max |g| whole (columns by priority, the rest from the header's menu)."""

from __future__ import annotations

from tests.gui_helpers import open_model, wait_idle

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
    assert len(visible) < header.count()  # the rest waits for a wider table...
    hidden = next(c for c in range(header.count()) if header.isSectionHidden(c))
    table.columns.choose(hidden, True)  # ...or the header's menu
    assert not header.isSectionHidden(hidden)
    tree_header = window.tree.header()
    for column in (0, 4, 5):  # module, norm, max |g|
        assert not tree_header.isSectionHidden(column)
    assert tree_header.sectionViewportPosition(5) + tree_header.sectionSize(5) <= \
        window.tree.viewport().width()


def test_optional_columns_wait_until_names_are_readable(qtbot):
    from gradexplorer.gui.column_priority import NAME_LEAST, NAME_ROOMY
    from gradexplorer.gui.models.selection import SelectionModel
    from gradexplorer.gui.parameter_table import ParameterTable

    table = ParameterTable(SelectionModel())
    qtbot.addWidget(table)
    columns = table.columns
    columns.widths = {0: 220, 1: 70, 2: 70, 3: 70, 4: 70, 5: 90, 6: 60, 7: 50}
    assert columns.shown_columns(NAME_LEAST + 140) == [0, 1, 2]  # narrow: name, norm, max |g|
    assert columns.shown_columns(220 + 140 + 60) == [0, 1, 2]  # the names get room first
    assert columns.shown_columns(220 + 140 + 70) == [0, 1, 2, 4]
    assert NAME_ROOMY >= 220
