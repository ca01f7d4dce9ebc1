"""Gradient snapshots: ``write_snapshot``, ``read_snapshot``, ``compare_snapshots``.

A snapshot is a directory (``step-000042``) holding ``gradients.safetensors`` (one tensor per
parameter with a gradient, keyed by its ``named_parameters()`` name, plus hook captures under
``hooks/``), ``manifest.json`` (format, versions, per-parameter stats and histograms, file
digests) and ``stats.csv``. It is written to a temporary directory and renamed into place.
"""

from __future__ import annotations

from gradexplorer.core.snapshot.compare import Comparison, ParamComparison, compare_snapshots
from gradexplorer.core.snapshot.format import FORMAT, VERSION, snapshot_name
from gradexplorer.core.snapshot.read import Snapshot, read_snapshot, resolve_snapshot_dir
from gradexplorer.core.snapshot.write import write_snapshot

__all__ = [
    "FORMAT", "VERSION", "Comparison", "ParamComparison", "Snapshot", "compare_snapshots",
    "read_snapshot", "resolve_snapshot_dir", "snapshot_name", "write_snapshot",
]
