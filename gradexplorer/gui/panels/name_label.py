"""A bold label showing one dotted parameter or module name shortened to its width by whole
components from the left (``…h.10.attn.c_attn.weight``, see ``name_elide``), re-shortened when
resized; the full name in its tooltip. A long name never widens the dock that holds it. The
name is text, never markup: ``<img src=x>.weight`` shows as written (``core.messages.printable``)."""

from __future__ import annotations

from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget

from gradexplorer.core.messages.printable import html_text
from gradexplorer.gui.text.name_elide import elide_to_width


def plain_tooltip(text: str) -> str:
    """``text`` as a tooltip that shows it as written (Qt renders a tooltip that looks like
    markup as rich text): unchanged when it holds nothing to escape, else escaped markup."""
    escaped = html_text(text)
    return text if escaped == text else f"<p>{escaped}</p>"


class NameLabel(QLabel):
    """``set_name(name)`` shows ``name`` (or the placeholder when it is empty or None)."""

    def __init__(self, placeholder: str, minimum: int = 40, parent: QWidget | None = None) -> None:
        super().__init__(placeholder, parent)
        self.placeholder = placeholder
        self.name: str | None = None
        self.setMinimumWidth(minimum)
        self.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)

    def set_name(self, name: str | None) -> None:
        self.name = name or None
        self._show()

    def _show(self) -> None:
        if self.name:
            bold = self.font()
            bold.setBold(True)
            advance = QFontMetrics(bold).horizontalAdvance
            self.setText(f"<b>{html_text(elide_to_width(self.name, advance, self.width() - 4))}</b>")
        else:
            self.setText(self.placeholder)
        self.setToolTip(plain_tooltip(self.name or ""))

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        self._show()
