"""Gradient snapshots: ``write_snapshot``, ``read_snapshot``, ``compare_snapshots``.

A snapshot is a directory (``step-000042``) holding ``gradients.safetensors`` (one tensor per
parameter with a gradient, keyed by its ``named_parameters()`` name, plus hook captures under
``hooks/``), ``manifest.json`` (format, versions, per-parameter stats and histograms, file
digests) and ``stats.csv``. It is written to a temporary directory and renamed into place.
"""

from __future__ import annotations

import importlib

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


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
