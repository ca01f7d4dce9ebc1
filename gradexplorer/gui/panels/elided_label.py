"""A one-line label whose text never widens what holds it: it asks for its text's width (so it
shows whole where there is room) but needs only ``minimum`` pixels, and where it gets less its
text ends in "…", whole in its tooltip (above the label's own tooltip, if it has one). A label that asked
for its text's width as its least made the Distributions tab's "6 of 6 · step 50 of 60" widen the
Gradients dock by 85 pixels at 1024×700 when a spike marker was clicked, the graph and the
Training dock beside it narrower."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget


class ElidedLabel(QLabel):
    """``setText`` the whole text; ``text()`` returns it whole, whatever is shown."""

    def __init__(self, text: str = "", minimum: int = 24, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setTextFormat(Qt.PlainText)
        self.setSizePolicy(QSizePolicy.Preferred, QSizePolicy.Fixed)
        self.least = minimum
        self.whole = ""
        self.own_tip = ""
        self.setText(text)

    def setText(self, text: str) -> None:  # noqa: N802 - Qt API
        self.whole = text
        self._show()
        self.updateGeometry()

    def text(self) -> str:
        return self.whole

    def setToolTip(self, tip: str) -> None:  # noqa: N802 - Qt API
        self.own_tip = tip
        self._show()

    def shown(self) -> str:
        """The text as drawn now (elided where the label is narrower than it)."""
        return super().text()

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt API
        margins = self.contentsMargins()
        return QSize(self.fontMetrics().horizontalAdvance(self.whole) + 6 + margins.left()
                     + margins.right(), super().sizeHint().height())

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt API
        return QSize(self.least, super().minimumSizeHint().height())

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        self._show()

    def _show(self) -> None:
        room = self.contentsRect().width() - 2
        metrics = self.fontMetrics()
        drawn = self.whole if metrics.horizontalAdvance(self.whole) <= room else \
            metrics.elidedText(self.whole, Qt.ElideRight, max(room, 0))
        if drawn != super().text():
            super().setText(drawn)
        cut = drawn != self.whole  # the whole text one hover away, with the label's own tip
        super().setToolTip("\n".join(t for t in (self.whole if cut else "", self.own_tip) if t)
                           or self.whole)


class WholeLabel(QLabel):
    """A short status text in a toolbar, always whole: its least width follows its text (a
    toolbar keeps the width a plain label had when it was laid out: at 1600×1000 the graph's
    '22 nodes · 0.49 s' was cut to '22 nodes · 0', sized for 'laying out…'); a toolbar too narrow
    for it moves it behind its » button whole."""

    def setText(self, text: str) -> None:  # noqa: N802 - Qt API
        super().setText(text)
        margins = self.contentsMargins()
        extra = 4 + margins.left() + margins.right()
        self.setMinimumWidth(self.fontMetrics().horizontalAdvance(text) + extra)
