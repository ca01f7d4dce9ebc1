"""Snapshot work done on the training thread: export now, or every K steps (Qt-free)."""

from __future__ import annotations

from pathlib import Path

from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.snapshot.export_dir import ExportFolder
from gradexplorer.core.snapshot.exporter import SnapshotExporter
from gradexplorer.gui.training.live_session import LiveSession


def export_now(live: LiveSession, directory: str | Path) -> Path:
    """Write a snapshot of the gradients the model holds after the latest step."""
    session = live.session
    if session.step_count == 0:
        raise UserError("run at least one step before exporting a snapshot: there are no gradients yet")
    return live.stack.snapshot(directory, session, live.monitor.latest(), replace=False)


def start_periodic_export(live: LiveSession, directory: str | Path, every: int,
                          listener=None) -> SnapshotExporter:
    """Export every ``every`` steps from now on; each one is told on the stack's bus
    (``snapshot``), and ``listener(step, path)``, where given, hears it too."""
    if every < 1:
        raise UserError(f"export every K steps needs K >= 1, got {every}")
    folder = ExportFolder(directory, overwrite_hint="move them first").claim()
    exporter = live.stack.exporter(directory, every, wrote=listener)
    exporter.folder = folder
    return exporter


def stop_periodic_export(live: LiveSession, exporter: SnapshotExporter) -> list[Path]:
    """Stop an exporter and give up its folder; returns what it wrote."""
    live.stack.stop_exporting(exporter)
    if exporter.folder is not None:
        exporter.folder.release()
    return exporter.written
