"""Recorded runs and snapshots read whole and shared: a run's history, where two runs part, the
distribution bands and smoothing of its curves, snapshots, the HTML report.

Documented in ``docs/api.md``; names load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gradexplorer._lazy import lazy_names

__all__ = [
    "Divergence",
    "Run",
    "RunHistory",
    "RunStep",
    "Snapshot",
    "compare_snapshots",
    "distribution_bands",
    "ema_smooth",
    "noise_params",
    "noise_rows",
    "find_divergence",
    "open_run",
    "read_snapshot",
    "write_report",
    "write_snapshot",
]

__getattr__, __dir__ = lazy_names(__name__, {
    "Run": "gradexplorer.core.runs.run",
    "open_run": "gradexplorer.core.runs.run",
    "RunHistory": "gradexplorer.core.runs.history",
    "RunStep": "gradexplorer.core.runs.run_step",
    "find_divergence": "gradexplorer.core.runs.divergence",
    "Divergence": "gradexplorer.core.runs.divergence",
    "distribution_bands": "gradexplorer.core.stats.bands",
    "ema_smooth": "gradexplorer.core.stats.curves",
    "noise_rows": "gradexplorer.core.runs.noise_rows",
    "noise_params": "gradexplorer.core.runs.noise_rows",
    "Snapshot": "gradexplorer.core.snapshot.read",
    "read_snapshot": "gradexplorer.core.snapshot.read",
    "write_snapshot": "gradexplorer.core.snapshot.write",
    "compare_snapshots": "gradexplorer.core.snapshot.compare",
    "write_report": "gradexplorer.core.share.report_html",
})

if TYPE_CHECKING:  # for type checkers and IDEs; at run time names load lazily above
    from gradexplorer.core.runs.divergence import Divergence, find_divergence
    from gradexplorer.core.runs.history import RunHistory
    from gradexplorer.core.runs.noise_rows import noise_params, noise_rows
    from gradexplorer.core.runs.run import Run, open_run
    from gradexplorer.core.runs.run_step import RunStep
    from gradexplorer.core.share.report_html import write_report
    from gradexplorer.core.snapshot.compare import compare_snapshots
    from gradexplorer.core.snapshot.read import Snapshot, read_snapshot
    from gradexplorer.core.snapshot.write import write_snapshot
    from gradexplorer.core.stats.bands import distribution_bands
    from gradexplorer.core.stats.curves import ema_smooth
