"""A model trained step by step in this process: the workload, the session and its settings, the
statistics monitor, devices and A/B runs; ``MonitorWarning``, the one category of what the
monitor could not do while the training went on.

Documented in ``docs/api.md``; names load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gradexplorer._lazy import lazy_names

__all__ = [
    "ABRun",
    "GradientMonitor",
    "ModelOptions",
    "MonitorWarning",
    "ParamOptimState",
    "SessionConfig",
    "SessionObserver",
    "SessionStack",
    "StepResult",
    "TrainingSession",
    "Workload",
    "available_devices",
    "gradient_stats",
    "load_workload",
    "unavailable_devices",
]

__getattr__, __dir__ = lazy_names(__name__, {
    "Workload": "gradexplorer.core.model.workload",
    "ModelOptions": "gradexplorer.core.model.spec",
    "MonitorWarning": "gradexplorer.core.messages.failures",
    "load_workload": "gradexplorer.core.model.spec",
    "TrainingSession": "gradexplorer.core.session.engine",
    "SessionStack": "gradexplorer.core.stack.assembly",
    "SessionObserver": "gradexplorer.core.stack.observer",
    "SessionConfig": "gradexplorer.core.session.engine",
    "StepResult": "gradexplorer.core.session.engine",
    "available_devices": "gradexplorer.core.session.devices",
    "unavailable_devices": "gradexplorer.core.session.devices",
    "ABRun": "gradexplorer.core.session.ab",
    "GradientMonitor": "gradexplorer.core.stats.monitor",
    "gradient_stats": "gradexplorer.core.stats.monitor",
    "ParamOptimState": "gradexplorer.core.stats.optimizer_state",
})

if TYPE_CHECKING:  # for type checkers and IDEs; at run time names load lazily above
    from gradexplorer.core.messages.failures import MonitorWarning
    from gradexplorer.core.model.spec import ModelOptions, load_workload
    from gradexplorer.core.model.workload import Workload
    from gradexplorer.core.session.ab import ABRun
    from gradexplorer.core.session.devices import available_devices, unavailable_devices
    from gradexplorer.core.session.engine import SessionConfig, StepResult, TrainingSession
    from gradexplorer.core.stack.assembly import SessionStack
    from gradexplorer.core.stack.observer import SessionObserver
    from gradexplorer.core.stats.monitor import GradientMonitor, gradient_stats
    from gradexplorer.core.stats.optimizer_state import ParamOptimState
