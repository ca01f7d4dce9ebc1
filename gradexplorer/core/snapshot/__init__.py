"""Gradient snapshots: ``write_snapshot``, ``read_snapshot``, ``compare_snapshots``.

A snapshot is a directory (``step-000042``) holding ``gradients.safetensors`` (one tensor per
parameter with a gradient, keyed by its ``named_parameters()`` name, plus hook captures under
``hooks/``), ``manifest.json`` (format, versions, per-parameter stats and histograms, file
digests) and ``stats.csv``. It is written to a temporary directory and renamed into place.
"""

from __future__ import annotations

from gradexplorer._lazy import lazy_names

# each name from its module when first asked for: a run's reader imports ``snapshot.schema``
# without the reading and writing code (torch, safetensors)
_HOMES = {"Comparison": "compare", "ParamComparison": "compare", "compare_snapshots": "compare",
          "FORMAT": "format", "VERSION": "format", "snapshot_name": "format",
          "Snapshot": "read", "read_snapshot": "read", "resolve_snapshot_dir": "read",
          "write_snapshot": "write"}

__all__ = [
    "FORMAT", "VERSION", "Comparison", "ParamComparison", "Snapshot", "compare_snapshots",
    "read_snapshot", "resolve_snapshot_dir", "snapshot_name", "write_snapshot",
]


__getattr__, __dir__ = lazy_names(__name__, {n: f"{__name__}.{m}" for n, m in _HOMES.items()})
