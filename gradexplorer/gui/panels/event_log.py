"""A running list of what happened: hook events, snapshots written, errors."""

from __future__ import annotations

import time

from PySide6.QtGui import QColor
from PySide6.QtWidgets import QListWidget, QListWidgetItem, QWidget

from gradexplorer.gui.theme import ALARM, icon

MAX_LINES = 2000


class EventLog(QListWidget):
    """Newest at the bottom; failures in red."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAlternatingRowColors(True)
        self.setWordWrap(True)

    def add(self, text: str, kind: str = "note") -> None:
        """Append one line (kind ``failed`` or ``error`` shows in red)."""
        item = QListWidgetItem(f"{time.strftime('%H:%M:%S')}  {text}")
        if kind in ("failed", "error"):
            item.setForeground(QColor(ALARM))
            item.setIcon(icon("alarm"))
        elif kind in ("attached", "detached"):
            item.setIcon(icon("hook"))
        elif kind == "snapshot":
            item.setIcon(icon("snapshot"))
        self.addItem(item)
        while self.count() > MAX_LINES:
            self.takeItem(0)
        self.scrollToBottom()
