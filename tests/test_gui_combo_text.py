"""Every choice box reads whole at every window size: the graph toolbar's detail box read
"Modules, deptl" at 1024×700 and 1600×1000 (its text measured with its own font against the
field its style draws the text in, as the view draws it)."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QComboBox, QStyle, QStyleOptionComboBox

from tests.gui_helpers import TIMEOUT_MS


def text_room(box: QComboBox) -> int:
    """The pixels the box's style gives its current text (the edit field, less the pixel the
    label is inset by on each side)."""
    option = QStyleOptionComboBox()
    box.initStyleOption(option)
    field = box.style().subControlRect(QStyle.CC_ComboBox, option, QStyle.SC_ComboBoxEditField, box)
    return field.width() - 2


def clipped(box: QComboBox) -> str | None:
    text = box.currentText()
    return None if box.fontMetrics().horizontalAdvance(text) <= text_room(box) else text


@pytest.mark.parametrize("size", [(800, 600), (921, 630), (1024, 700), (1600, 1000)])
def test_every_choice_box_reads_whole(make_window, qtbot, size):
    window = make_window()
    window.resize(*size)
    qtbot.waitUntil(lambda: window.size().toTuple() == size, timeout=TIMEOUT_MS)
    window.dock_shares.apply()
    checked = set()
    docks = (window.gradients_dock, window.distributions_dock, window.curves_dock,
             window.forensics.optimizer_dock)
    for dock in docks:
        dock.raise_()
        qtbot.waitUntil(lambda d=dock: d.isVisible() and bool(d.widget().findChildren(QComboBox)),
                        timeout=TIMEOUT_MS)
        panel = window.graph_panel  # its boxes first: the ones that read "Modules, deptl"
        for box in [panel.detail_box, panel.layout_box, *window.findChildren(QComboBox)]:
            if not box.isVisible() or box in checked or box.isEditable():
                continue
            checked.add(box)
            for index in range(box.count()):
                box.setCurrentIndex(index)
                qtbot.waitUntil(lambda b=box: b.width() >= b.minimumWidth(), timeout=TIMEOUT_MS)
                window.layout().activate()
                assert clipped(box) is None, (size, box.toolTip(), box.currentText(), box.width(),
                                              text_room(box))
            box.setCurrentIndex(0)
    assert {panel.layout_box, panel.detail_box} <= checked
    assert panel.view.width() > 200 and panel.search_edit.isVisible()


def test_the_detail_box_reads_whole_after_a_theme_switch(make_window, qtbot):
    """The style sheet's border and padding change the box's chrome: it fits again."""
    window = make_window()
    window.resize(1024, 700)
    box = window.graph_panel.detail_box
    box.setCurrentIndex(1)
    for theme in ("dark", "light"):
        window.set_theme(theme)
        qtbot.waitUntil(lambda: clipped(box) is None, timeout=5_000)
        assert box.width() < 200  # as wide as its item, not stretched over a wide row
