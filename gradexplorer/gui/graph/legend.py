"""The colour key under the graph, and the graph panel's small widget helpers."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QRect
from PySide6.QtWidgets import QComboBox, QLabel, QStyle, QStyleOptionComboBox


def whole_width(box: QComboBox, text: str) -> int:
    """The width at which ``box`` draws ``text`` whole: the text, the pixel its label is inset
    by on each side, and what the style (and style sheet) frame and arrow take from the box."""
    box.ensurePolished()  # the style sheet's border and padding count
    option = QStyleOptionComboBox()
    box.initStyleOption(option)
    option.rect = QRect(0, 0, 400, max(box.sizeHint().height(), 20))
    field = box.style().subControlRect(QStyle.CC_ComboBox, option, QStyle.SC_ComboBoxEditField, box)
    return box.fontMetrics().horizontalAdvance(text) + 2 + option.rect.width() - field.width()


class _ReadsWhole(QObject):
    """Fits its combo box again when the item, the style (a theme switch) or the font changes."""

    EVENTS = (QEvent.StyleChange, QEvent.FontChange, QEvent.Polish)

    def __init__(self, box: QComboBox) -> None:
        super().__init__(box)
        self.box = box
        box.currentIndexChanged.connect(self.fit)
        box.installEventFilter(self)
        self.fit()

    def fit(self, _index: int = -1) -> None:
        width = whole_width(self.box, self.box.currentText())
        if width != self.box.width() or self.box.minimumWidth() != width:
            self.box.setFixedWidth(width)

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 - Qt API
        if event.type() in self.EVENTS:
            self.fit()
        return False


def reads_whole(box: QComboBox) -> None:
    """Keep ``box`` as wide as the item it shows, whatever the window's size (a clipped
    "Modules, deptl" read as nothing; a 4K window's 500-pixel box, as odd): its popup lists
    every item whole."""
    box.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)  # no hint of its own
    _ReadsWhole(box)


def legend_label() -> QLabel:
    """The colour key under the graph."""
    from gradexplorer.core.graph.style import HOOK_MARK, KIND_FILL
    from gradexplorer.gui.theme import ALARM, SELECTION

    def swatch(colour: str, text: str, ring: bool | str = False) -> str:
        # a key never breaks inside its own words, nor after a slash or an arrow ("NaN/" | "Inf")
        text = text.replace(" ", "&nbsp;").replace("/", "/\u2060").replace("→", "\u2060→\u2060")
        if ring:
            mark = "◎" if ring == "double" else "▢"
            return f"<b style='color:{colour}'>{mark}</b>&nbsp;{text}&nbsp;&nbsp; "
        return f"<span style='background:{colour}'>&nbsp;&nbsp;&nbsp;&nbsp;</span>&nbsp;{text}&nbsp;&nbsp; "

    kinds = (("op", "operation"), ("param", "parameter"), ("hook", "hook node"), ("loss", "loss"),
             ("module", "module"))
    text = "".join(swatch(KIND_FILL[k], label) for k, label in kinds)
    text += (swatch("#ffb74d", "tint: |g| low→high") + swatch("#e0e0e0", "no gradient")
             + swatch("#b39ddb", "NaN/Inf")
             + swatch(ALARM, "NaN/Inf born here", "double")
             + swatch(HOOK_MARK, "hooked", True) + swatch(SELECTION, "selected", True))
    label = QLabel(text)
    label.setToolTip("tint: each node coloured by the latest gradient norm of the parameters "
                     "behind it (Trace gradients: by the gradient the op itself sent on); a "
                     "gradient holding NaN or ±Inf is violet, never a heat colour")
    label.setObjectName("legend")
    label.setContentsMargins(6, 1, 6, 1)
    label.setWordWrap(True)
    return label
