"""The live session as the views see it: run state, attached hooks, typed job results."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from psygnal import Signal

IDLE, LOADING, RUNNING, PAUSED = "idle", "loading", "running", "paused"


# -- typed results of jobs run on the training thread ----------------------------------------
@dataclass(frozen=True)
class SessionOpened:
    """A model was loaded (``fresh``) or the session re-made under a new device/optimizer."""

    live: Any  # LiveSession
    fresh: bool


@dataclass(frozen=True)
class ModelBuilt:
    """A model opened with a first view is built: ``view`` is that view's typed result (e.g.
    ``GraphTraced``), ``finish`` the job that sets its training up (a ``SessionOpened``)."""

    view: Any
    finish: Any  # () -> SessionOpened, run on the training thread
    opening: int  # which open_model call built it


@dataclass(frozen=True)
class HooksChanged:
    """The hooks now attached: module path -> action spec."""

    hooks: dict[str, str]


@dataclass(frozen=True)
class GraphTraced:
    """A traced backward graph; ``fit``: zoom the view to it."""

    graph: Any  # networkx.DiGraph
    fit: bool = True
    first: bool = False  # the first view of a model still opening (its session follows)


@dataclass(frozen=True)
class HookableProbed:
    """Which modules take a full backward hook safely: path -> (safe, reason)."""

    hookable: dict[str, tuple[bool, str]]


@dataclass(frozen=True)
class SnapshotWritten:
    """A snapshot written on request."""

    path: Path


@dataclass(frozen=True)
class ExportChanged:
    """Periodic export turned on (an exporter) or off (None)."""

    exporter: Any


@dataclass(frozen=True)
class SettingApplied:
    """A training setting took effect from the next step on (``lr``, ``histogram_every``)."""

    name: str
    value: Any


class SessionModel:
    """The live session, its run state and hooks; changed on the GUI thread only.

    Events: ``opened(LiveSession)``, ``model_opened(LiveSession)`` (a new model, before
    ``opened``), ``state_changed(str)``, ``hooks_changed(dict)``,
    ``job_finished(result)`` with one of the typed results above, ``error(str)`` (one line for a
    dialog), ``message(str)`` (a status-bar note), ``event(kind, text)`` for the event log and
    ``observed_changed(dict)`` (module -> ObservedGrads: what observe hooks saw last).
    """

    opened = Signal(object)
    model_opened = Signal(object)  # a fresh model (not a re-made session), before ``opened``
    state_changed = Signal(str)
    hooks_changed = Signal(dict)
    job_finished = Signal(object)
    error = Signal(str)
    message = Signal(str)
    event = Signal(str, str)
    observed_changed = Signal(dict)

    def __init__(self) -> None:
        self.live: Any = None
        self.state = IDLE
        self.hooks: dict[str, str] = {}
        self.exporter: Any = None
        self.observed: dict[str, Any] = {}

    def set_state(self, state: str) -> None:
        """Announce a new run state (no event when unchanged)."""
        if state != self.state:
            self.state = state
            self.state_changed.emit(state)

    def set_hooks(self, hooks: dict[str, str]) -> None:
        """Announce the hooks now attached."""
        self.hooks = dict(hooks)
        self.hooks_changed.emit(self.hooks)
        if any(module not in self.hooks for module in self.observed):  # detached: forget them
            self.set_observed({m: o for m, o in self.observed.items() if m in self.hooks}, merge=False)

    def set_observed(self, observed: dict[str, Any], merge: bool = True) -> None:
        """Announce what observe hooks saw (merged into what they saw before, unless ``merge``
        is False)."""
        self.observed = {**self.observed, **observed} if merge else dict(observed)
        self.observed_changed.emit(self.observed)

    def open(self, live: Any, fresh: bool) -> None:
        """Show a newly opened (or re-made) session."""
        self.live = live
        if fresh:
            if self.exporter is not None and self.exporter.folder is not None:
                self.exporter.folder.release()  # a new model: its export folder is free again
            self.hooks, self.exporter = {}, None
            self.set_observed({}, merge=False)
            self.model_opened.emit(live)
        self.set_state(IDLE)
        self.opened.emit(live)
        self.hooks_changed.emit(self.hooks)
