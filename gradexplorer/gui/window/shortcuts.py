"""The window's shortcuts work whatever has focus: a text field does not swallow them."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QLineEdit,
    QPlainTextEdit,
    QTextEdit,
    QWidget,
)

TEXT_FIELDS = (QLineEdit, QAbstractSpinBox, QComboBox, QPlainTextEdit, QTextEdit)
EDITING_KEYS = (QKeySequence.Copy, QKeySequence.Cut, QKeySequence.Paste, QKeySequence.Undo,
                QKeySequence.Redo, QKeySequence.SelectAll)


def editing_sequences() -> set[QKeySequence]:
    """Copy, cut, paste, undo, redo, select all: keys a text field keeps (built on first use,
    once a QApplication exists — building key sequences at import time crashes without one)."""
    global _EDITING
    if _EDITING is None:
        _EDITING = {QKeySequence(k) for k in EDITING_KEYS}
    return _EDITING


_EDITING: set[QKeySequence] | None = None


def is_command_key(sequence: QKeySequence) -> bool:
    """A key a command may take from a text field: Ctrl/Alt chords and function keys, never a
    plain letter (the field types it) nor an editing key (Ctrl+C, Ctrl+V, ...)."""
    if sequence.isEmpty() or sequence in editing_sequences():
        return False
    combo = sequence[0]
    chord = combo.keyboardModifiers() & (Qt.ControlModifier | Qt.AltModifier | Qt.MetaModifier)
    return bool(chord) or Qt.Key_F1 <= combo.key() <= Qt.Key_F35


class WindowShortcutsFirst(QObject):
    """An application event filter: when a text field in ``window`` would keep a key that is one
    of the window's command shortcuts (Ctrl+E in a QLineEdit moves to the end of the line, so an
    export was lost), the field lets it go and the command runs."""

    def __init__(self, window: QWidget) -> None:
        super().__init__(window)
        self.window = window
        QApplication.instance().installEventFilter(self)
        window.destroyed.connect(self._remove)

    def _remove(self, *_args) -> None:
        app = QApplication.instance()
        if app is not None:
            app.removeEventFilter(self)

    def command_keys(self) -> set[QKeySequence]:
        """The window's enabled shortcuts that may override a text field."""
        return {a.shortcut() for a in self.window.findChildren(QAction)
                if a.isEnabled() and is_command_key(a.shortcut())}

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt API
        if event.type() != QEvent.ShortcutOverride or not isinstance(obj, TEXT_FIELDS):
            return False
        if obj.window() is not self.window:
            return False
        pressed = QKeySequence(event.keyCombination())
        if pressed in self.command_keys():
            event.ignore()  # not overridden: the shortcut fires
            return True
        return False
