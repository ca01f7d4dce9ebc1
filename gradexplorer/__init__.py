"""gradexplorer: see and control PyTorch's backward pass.

The public API, documented in ``docs/api.md``. Names are imported on first use, so
``import gradexplorer`` stays cheap (the command line starts without loading torch)::

    from gradexplorer import load_workload, TrainingSession, SessionConfig
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gradexplorer._version import __version__

# public name -> module that defines it
_API = {
    "UserError": "gradexplorer.core.errors",
    # model
    "Workload": "gradexplorer.core.model.workload",
    "ModelOptions": "gradexplorer.core.model.spec",
    "load_workload": "gradexplorer.core.model.spec",
    # session
    "TrainingSession": "gradexplorer.core.session.engine",
    "SessionStack": "gradexplorer.core.stack.assembly",
    "SessionConfig": "gradexplorer.core.session.engine",
    "StepResult": "gradexplorer.core.session.engine",
    "available_devices": "gradexplorer.core.session.devices",
    "unavailable_devices": "gradexplorer.core.session.devices",
    # statistics
    "GradientMonitor": "gradexplorer.core.stats.monitor",
    "gradient_stats": "gradexplorer.core.stats.monitor",
    "StepGradients": "gradexplorer.core.stats.records",
    "ParamStats": "gradexplorer.core.stats.records",
    "Histogram": "gradexplorer.core.stats.records",
    "StepLedger": "gradexplorer.core.stats.ledger",
    "ParamOptimState": "gradexplorer.core.stats.optimizer_state",
    # hooks
    "HookRegistry": "gradexplorer.core.hooks.registry",
    "parse_action": "gradexplorer.core.hooks.parse",
    "hookable_modules": "gradexplorer.core.hooks.hookable",
    "ParameterGradientWatcher": "gradexplorer.core.hooks.param_watcher",
    # graph
    "extract_graph": "gradexplorer.core.graph.extract",
    "trace_backward_graph": "gradexplorer.core.graph.extract",
    "trace": "gradexplorer.core.graph.extract",
    "collapse_by_module": "gradexplorer.core.graph.collapse",
    "layout_graph": "gradexplorer.core.graph.layout.positions",
    "export_graph": "gradexplorer.core.graph.export.files",
    # diagnosis
    "trace_gradients": "gradexplorer.core.diagnose.trace_grads",
    "nonfinite_origin": "gradexplorer.core.diagnose.nan_origin",
    "diagnose_step": "gradexplorer.core.diagnose.nan_origin",
    "NonFiniteOrigin": "gradexplorer.core.diagnose.nan_origin",
    "explain_graph": "gradexplorer.core.diagnose.explain",
    "ABRun": "gradexplorer.core.session.ab",
    "SpikeSettings": "gradexplorer.core.diagnose.spike_band",
    "SpikeEvent": "gradexplorer.core.diagnose.spikes",
    "SpikeObserver": "gradexplorer.core.diagnose.spike_observer",
    "find_divergence": "gradexplorer.core.recorder.divergence",
    "Divergence": "gradexplorer.core.recorder.divergence",
    # snapshots
    "Snapshot": "gradexplorer.core.snapshot.read",
    "read_snapshot": "gradexplorer.core.snapshot.read",
    "write_snapshot": "gradexplorer.core.snapshot.write",
    "compare_snapshots": "gradexplorer.core.snapshot.compare",
    # watching a training loop the user runs
    "watch": "gradexplorer.core.recorder.recorder",
    "Recorder": "gradexplorer.core.recorder.recorder",
    "open_run": "gradexplorer.core.recorder.run",
    "Run": "gradexplorer.core.recorder.run",
    # reading a whole run, sharing it
    "RunHistory": "gradexplorer.core.recorder.run_history",
    "distribution_bands": "gradexplorer.core.stats.bands",
    "ema_smooth": "gradexplorer.core.stats.curves",
    "write_report": "gradexplorer.core.share.report_html",
}

__all__ = [
    "ABRun",
    "Divergence",
    "GradientMonitor",
    "Histogram",
    "HookRegistry",
    "ModelOptions",
    "NonFiniteOrigin",
    "ParamOptimState",
    "ParamStats",
    "ParameterGradientWatcher",
    "Recorder",
    "Run",
    "RunHistory",
    "SessionConfig",
    "Snapshot",
    "SpikeEvent",
    "SpikeObserver",
    "SpikeSettings",
    "StepGradients",
    "StepLedger",
    "StepResult",
    "TrainingSession",
    "SessionStack",
    "UserError",
    "Workload",
    "__version__",
    "available_devices",
    "collapse_by_module",
    "compare_snapshots",
    "diagnose_step",
    "distribution_bands",
    "ema_smooth",
    "explain_graph",
    "export_graph",
    "extract_graph",
    "find_divergence",
    "gradient_stats",
    "hookable_modules",
    "layout_graph",
    "load_workload",
    "nonfinite_origin",
    "open_run",
    "parse_action",
    "read_snapshot",
    "trace",
    "trace_backward_graph",
    "trace_gradients",
    "unavailable_devices",
    "watch",
    "write_report",
    "write_snapshot",
]


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'gradexplorer' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # for type checkers and IDEs; at run time names load lazily above
    from gradexplorer.core.diagnose.spike_band import SpikeSettings
    from gradexplorer.core.diagnose.spike_observer import SpikeObserver
    from gradexplorer.core.diagnose.spikes import SpikeEvent
    from gradexplorer.core.errors import UserError
    from gradexplorer.core.graph.collapse import collapse_by_module
    from gradexplorer.core.graph.export.files import export_graph
    from gradexplorer.core.graph.extract import extract_graph, trace, trace_backward_graph
    from gradexplorer.core.graph.layout.positions import layout_graph
    from gradexplorer.core.hooks.hookable import hookable_modules
    from gradexplorer.core.hooks.param_watcher import ParameterGradientWatcher
    from gradexplorer.core.hooks.parse import parse_action
    from gradexplorer.core.hooks.registry import HookRegistry
    from gradexplorer.core.model.spec import ModelOptions, load_workload
    from gradexplorer.core.model.workload import Workload
    from gradexplorer.core.recorder.divergence import Divergence, find_divergence
    from gradexplorer.core.recorder.recorder import Recorder, watch
    from gradexplorer.core.recorder.run import Run, open_run
    from gradexplorer.core.recorder.run_history import RunHistory
    from gradexplorer.core.session.devices import available_devices, unavailable_devices
    from gradexplorer.core.session.engine import SessionConfig, StepResult, TrainingSession
    from gradexplorer.core.share.report_html import write_report
    from gradexplorer.core.snapshot.compare import compare_snapshots
    from gradexplorer.core.snapshot.read import Snapshot, read_snapshot
    from gradexplorer.core.snapshot.write import write_snapshot
    from gradexplorer.core.stats.bands import distribution_bands
    from gradexplorer.core.stats.curves import ema_smooth
    from gradexplorer.core.stats.ledger import StepLedger
    from gradexplorer.core.stats.monitor import GradientMonitor, gradient_stats
    from gradexplorer.core.stats.optimizer_state import ParamOptimState
    from gradexplorer.core.stats.records import Histogram, ParamStats, StepGradients
