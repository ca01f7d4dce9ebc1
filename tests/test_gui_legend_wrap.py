"""The graph's colour key wraps between its entries, never inside one: at 1024×700 it read
'NaN/' at the end of a line and 'Inf' at the start of the next."""

from __future__ import annotations

from PySide6.QtGui import QTextDocument

from gradexplorer.gui.graph.legend import legend_label


def lines(html: str, font, width: int) -> list[str]:
    doc = QTextDocument()
    doc.setDefaultFont(font)
    doc.setHtml(html)
    doc.setTextWidth(width)
    doc.size()  # laid out now
    out = []
    block = doc.begin()
    while block.isValid():
        layout, text = block.layout(), block.text()
        for i in range(layout.lineCount()):
            line = layout.lineAt(i)
            out.append(text[line.textStart():line.textStart() + line.textLength()])
        block = block.next()
    return out


def test_the_colour_key_never_breaks_inside_an_entry(qtbot):
    checked = 0
    label = legend_label()
    qtbot.addWidget(label)
    keys = ["operation", "parameter", "hook node", "loss", "module", "tint: |g| low→high",
            "no gradient", "NaN/Inf", "NaN/Inf born here", "hooked", "selected"]
    font = label.font()
    font.setPointSizeF(8)  # the app's style sheet's
    for width in range(150, 900, 3):
        for line in lines(label.text(), font, width):
            shown = line.replace("\u00a0", " ").replace("\u2060", "").strip()
            assert not shown.startswith(("Inf", "high")), (width, shown)
            assert not shown.endswith(("NaN/", "low→", "low")), (width, shown)
            checked += 1
    assert checked > 250
    assert all(key in label.text().replace("&nbsp;", " ").replace("\u2060", "") for key in keys)
