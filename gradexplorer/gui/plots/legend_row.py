"""A plot's key outside its data: a wrapped line of coloured samples and names under the
plot's toolbar (pyqtgraph's legend lies inside the view box, over the curves: at 1024×700 with
three runs it covered the loss plot, and a curve ran through the names)."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QSizePolicy

from gradexplorer.core.messages.printable import html_text

SOLID, DASHED = "━━", "╍╍"


def key_html(entries: Sequence[tuple[str, str, bool]]) -> str:
    """``(name, colour, dashed)`` entries as one wrapping line: each sample and its name kept
    together, entries broken between."""
    parts = []
    for name, colour, dashed in entries:
        sample = f"<span style='color:{colour}'><b>{DASHED if dashed else SOLID}</b></span>"
        parts.append(f"<span style='white-space:nowrap'>{sample}&nbsp;{html_text(name)}</span>")
    return " &nbsp; ".join(parts)


class LegendRow(QLabel):
    """The key of one plot, set by ``show_entries``; hidden with fewer than two entries (one
    line needs no key). Asks for no width of its own: a long run name wraps, never widens the
    dock."""

    def __init__(self) -> None:
        super().__init__("")
        self.setWordWrap(True)
        self.setTextFormat(Qt.RichText)
        self.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Minimum)
        self.setMinimumWidth(1)
        self.setContentsMargins(6, 0, 4, 0)
        font = self.font()
        font.setPointSizeF(max(7.0, font.pointSizeF() * 0.9))
        self.setFont(font)
        self.entries: list[tuple[str, str, bool]] = []
        self.setVisible(False)

    def show_entries(self, entries: Sequence[tuple[str, str, bool]]) -> None:
        """Name ``entries`` (``(name, colour, dashed)``), in order."""
        self.entries = list(entries)
        self.setText(key_html(self.entries))
        self.setToolTip("\n".join(name for name, _colour, _dashed in self.entries))
        self.setVisible(len(self.entries) > 1)

    def names(self) -> list[str]:
        """The names shown now (none while hidden)."""
        return [name for name, _c, _d in self.entries] if len(self.entries) > 1 else []


class SharedKey(LegendRow):
    """One key for plots side by side (the loss and norm curves: the same runs in the same
    colours): each plot names its lines through its own ``slot()``, the row shows every slot's
    entries once, in order. Two keys side by side, each half the dock wide, took three lines
    apiece at 1024×700 with three runs and left the plots under them 29 pixels tall."""

    def __init__(self) -> None:
        super().__init__()
        self.slots: list[KeySlot] = []

    def slot(self) -> KeySlot:
        """A new plot's part of the key."""
        self.slots.append(KeySlot(self))
        return self.slots[-1]

    def merge(self) -> None:
        """Show the slots' entries, each once (a slot of one line names nothing)."""
        merged: list[tuple[str, str, bool]] = []
        for slot in self.slots:
            merged += [e for e in slot.entries if len(slot.entries) > 1 and e not in merged]
        self.show_entries(merged)


class KeySlot:
    """What one plot's ``OverlayLines`` names in a ``SharedKey`` (as a ``LegendRow`` would)."""

    def __init__(self, key: SharedKey) -> None:
        self.key = key
        self.entries: list[tuple[str, str, bool]] = []

    def show_entries(self, entries: Sequence[tuple[str, str, bool]]) -> None:
        self.entries = list(entries)
        self.key.merge()

    def names(self) -> list[str]:
        """The names this plot's lines have in the key (none for a single line)."""
        return [name for name, _c, _d in self.entries] if len(self.entries) > 1 else []
