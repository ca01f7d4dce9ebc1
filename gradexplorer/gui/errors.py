"""Showing a problem to the user as a dialog; the app keeps running."""

from __future__ import annotations

from PySide6.QtWidgets import QMessageBox, QWidget


def show_error(parent: QWidget | None, text: str, title: str = "gradexplorer") -> None:
    """A modal error box with the one-line message."""
    QMessageBox.critical(parent, title, text)

