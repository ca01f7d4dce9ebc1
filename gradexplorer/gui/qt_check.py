"""Refusing a Qt binding known to crash, with a line that says how to fix it."""

from __future__ import annotations

import sys

from gradexplorer.core.messages.errors import UserError


def check_qt_binding() -> None:
    """Raise UserError for PySide6 6.12.0 under Python < 3.12 (it over-releases None and aborts)."""
    import PySide6

    if PySide6.__version__ == "6.12.0" and sys.version_info < (3, 12):
        raise UserError(
            "PySide6 6.12.0 crashes under Python "
            f"{sys.version_info.major}.{sys.version_info.minor}; "
            "install another version: pip install 'PySide6-Essentials!=6.12.0'"
        )
