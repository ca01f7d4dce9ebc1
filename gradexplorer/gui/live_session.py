"""A training session together with the observers the app attaches to it (Qt-free)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from gradexplorer.core.engine import SessionConfig, TrainingSession
from gradexplorer.core.model_spec import ModelOptions, load_workload

try:  # contract (1): gradient statistics
    from gradexplorer.core.grad_stats import GradientMonitor
except ImportError:  # pragma: no cover - before the stats branch is merged
    GradientMonitor = None  # type: ignore[assignment,misc]
try:  # contract (3): hooks
    from gradexplorer.core.hooks import HookRegistry
except ImportError:  # pragma: no cover
    HookRegistry = None  # type: ignore[assignment,misc]


@dataclass
class LiveSession:
    """The session the app drives, its gradient monitor and its hook registry."""

    session: TrainingSession
    spec: str
    options: ModelOptions
    monitor: Any = None
    hooks: Any = None

    @property
    def config(self) -> SessionConfig:
        """How the session trains."""
        return self.session.config


def open_live_session(
    spec: str, options: ModelOptions, config: SessionConfig, bins: int = 64, every: int = 1
) -> LiveSession:
    """Load ``spec`` and build a session with a gradient monitor and a hook registry."""
    workload = load_workload(spec, options)
    session = TrainingSession(workload, config)
    monitor = GradientMonitor(bins=bins, every=every) if GradientMonitor else None
    hooks = HookRegistry(session.model) if HookRegistry else None
    live = LiveSession(session, spec, options, monitor, hooks)
    _attach(live)
    return live


def reconfigure(live: LiveSession, **changes: Any) -> LiveSession:
    """The same model and hooks under a new device or optimizer; the step count carries on."""
    config = replace(live.session.config, **changes)
    session = TrainingSession(live.session.workload, config)
    session.step_count = live.session.step_count
    new = LiveSession(session, live.spec, live.options, live.monitor, live.hooks)
    _attach(new)
    return new


def _attach(live: LiveSession) -> None:
    if live.monitor is not None:
        live.session.add_observer(live.monitor)
    if live.hooks is not None:
        live.hooks.install(live.session)
