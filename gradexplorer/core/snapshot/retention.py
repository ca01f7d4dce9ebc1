"""The one retention policy of snapshots: keep the newest N by step, remove the rest.

Used by the exporter of the app and ``gradexplorer run --export`` (``SnapshotExporter``,
``keep_snapshots``) and by a watched run's directory (``RunWriter.add_snapshot``), so that the
same steps stay on disk whichever wrote them.
"""

from __future__ import annotations

from collections.abc import Iterable


def steps_to_remove(steps: Iterable[int], keep: int | None) -> list[int]:
    """Of the snapshots of ``steps``, those to remove so that only the newest ``keep`` (by step
    number) stay, oldest first; none when ``keep`` is None (keep all)."""
    if keep is None:
        return []
    if keep < 1:
        raise ValueError(f"keep_snapshots must be at least 1, got {keep}")
    return sorted(set(steps), reverse=True)[keep:][::-1]
