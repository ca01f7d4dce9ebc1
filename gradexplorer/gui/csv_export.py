"""Save what a view shows as CSV: the path asked for, the file written by the core (atomic,
floats exact), a failure shown as one line."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from PySide6.QtWidgets import QFileDialog, QWidget

from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.stats.curves import write_csv
from gradexplorer.gui.errors import show_error


def save_csv(parent: QWidget, name: str, header: Sequence[str],
             rows: Iterable[Sequence[object]]) -> str | None:
    """Ask where to save ``name``.csv and write it; returns the path, None when cancelled."""
    path, _ = QFileDialog.getSaveFileName(parent, f"Save {name} as CSV", f"{name}.csv",
                                          "CSV files (*.csv)")
    if not path:
        return None
    try:
        write_csv(path, header, rows)
    except UserError as exc:
        show_error(parent, str(exc))
        return None
    return path
