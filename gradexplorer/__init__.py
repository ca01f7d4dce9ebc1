"""gradexplorer: see and control PyTorch's backward pass.

The public API, documented in ``docs/api.md``: the user's stories at the top level (watch a
training loop, open its run, trace a backward graph, read and compare snapshots, write a report)
and the rest in documented namespaces: ``gradexplorer.session``, ``.hooks``, ``.graph``,
``.diagnose``, ``.runs``. Names are imported on first use, so ``import gradexplorer`` stays cheap
(the command line starts without loading torch)::

    import gradexplorer as gx
    from gradexplorer.session import SessionConfig

Names that were at the top level before these namespaces still work for one release, with a
DeprecationWarning that says where each went.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gradexplorer._lazy import lazy_names
from gradexplorer._version import __version__

# public name -> module that defines it
_API = {
    "watch": "gradexplorer.core.watch.recorder",
    "Recorder": "gradexplorer.core.watch.recorder",
    "open_run": "gradexplorer.core.runs.run",
    "Run": "gradexplorer.core.runs.run",
    "trace": "gradexplorer.core.graph.extract",
    "read_snapshot": "gradexplorer.core.snapshot.read",
    "compare_snapshots": "gradexplorer.core.snapshot.compare",
    "write_report": "gradexplorer.core.share.report_html",
    "UserError": "gradexplorer.core.messages.errors",
    "StepGradients": "gradexplorer.core.stats.records",
    "ParamStats": "gradexplorer.core.stats.records",
    "Histogram": "gradexplorer.core.stats.records",
    "StepLedger": "gradexplorer.core.steps.ledger",
    "load_workload": "gradexplorer.core.model.spec",
    "TrainingSession": "gradexplorer.core.session.engine",
}
_NAMESPACES = {
    "session": "gradexplorer.session",
    "hooks": "gradexplorer.hooks",
    "graph": "gradexplorer.graph",
    "diagnose": "gradexplorer.diagnose",
    "runs": "gradexplorer.runs",
}
# deprecated top-level names -> the namespace that holds them now
_MOVED = {
    "Workload": "gradexplorer.session",
    "ModelOptions": "gradexplorer.session",
    "SessionStack": "gradexplorer.session",
    "SessionConfig": "gradexplorer.session",
    "StepResult": "gradexplorer.session",
    "available_devices": "gradexplorer.session",
    "unavailable_devices": "gradexplorer.session",
    "ABRun": "gradexplorer.session",
    "GradientMonitor": "gradexplorer.session",
    "gradient_stats": "gradexplorer.session",
    "ParamOptimState": "gradexplorer.session",
    "HookRegistry": "gradexplorer.hooks",
    "parse_action": "gradexplorer.hooks",
    "hookable_modules": "gradexplorer.hooks",
    "ParameterGradientWatcher": "gradexplorer.hooks",
    "extract_graph": "gradexplorer.graph",
    "trace_backward_graph": "gradexplorer.graph",
    "collapse_by_module": "gradexplorer.graph",
    "layout_graph": "gradexplorer.graph",
    "export_graph": "gradexplorer.graph",
    "trace_gradients": "gradexplorer.diagnose",
    "nonfinite_origin": "gradexplorer.diagnose",
    "diagnose_step": "gradexplorer.diagnose",
    "NonFiniteOrigin": "gradexplorer.diagnose",
    "explain_graph": "gradexplorer.diagnose",
    "SpikeSettings": "gradexplorer.diagnose",
    "SpikeEvent": "gradexplorer.diagnose",
    "SpikeObserver": "gradexplorer.diagnose",
    "RunHistory": "gradexplorer.runs",
    "find_divergence": "gradexplorer.runs",
    "Divergence": "gradexplorer.runs",
    "distribution_bands": "gradexplorer.runs",
    "ema_smooth": "gradexplorer.runs",
    "Snapshot": "gradexplorer.runs",
    "write_snapshot": "gradexplorer.runs",
}

__all__ = [
    "__version__",
    "Histogram",
    "ParamStats",
    "Recorder",
    "Run",
    "StepGradients",
    "StepLedger",
    "TrainingSession",
    "UserError",
    "compare_snapshots",
    "load_workload",
    "open_run",
    "read_snapshot",
    "trace",
    "watch",
    "write_report",
]

__getattr__, __dir__ = lazy_names(__name__, {**_API, **_NAMESPACES}, _MOVED)

if TYPE_CHECKING:  # for type checkers and IDEs; at run time names load lazily above
    from gradexplorer.core.graph.extract import trace
    from gradexplorer.core.messages.errors import UserError
    from gradexplorer.core.model.spec import load_workload
    from gradexplorer.core.runs.run import Run, open_run
    from gradexplorer.core.session.engine import TrainingSession
    from gradexplorer.core.share.report_html import write_report
    from gradexplorer.core.snapshot.compare import compare_snapshots
    from gradexplorer.core.snapshot.read import read_snapshot
    from gradexplorer.core.stats.records import Histogram, ParamStats, StepGradients
    from gradexplorer.core.steps.ledger import StepLedger
    from gradexplorer.core.watch.recorder import Recorder, watch
