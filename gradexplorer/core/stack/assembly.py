"""``SessionStack``: the one assembly of what observes a training session, in one phase order.

The app (``gui/training/live_session.py``), ``gradexplorer run`` (``commands/gradient_options.py``),
``watch`` (``core/watch/recorder.py``) and both arms of an A/B run (``core/session/ab.py``)
build their session's observers here, so that the
same loop gives the same figures and the same snapshots from each. A stack is the session's one
observer and runs its parts in four phases, each part once:

1. **after backward** (gradients complete, the optimizer not yet stepped): the hook registry
   notes the hooks that shaped them (``end_backward``); the monitor begins measuring
   (``GradientMonitor.begin``); the NaN-origin finder, reading the NaN/Inf counts the monitor
   has just taken (no check of its own), replays a step whose gradients hold NaN/Inf;
2. **measure** (the optimizer has stepped): the monitor's StepGradients
   (``GradientMonitor.finish``) into ``result.gradients`` (and the global norm, where the
   session left it unset);
3. **after step**: the result's other typed fields: ``hooks`` (the registry),
   ``nonfinite_origin``, then each reporter in order (spikes, what observe hooks saw, the
   optimizer's state);
4. **publish**: whoever only reads the finished result, in order: snapshot exporters, the
   command line's alarm.

``watch`` has no TrainingSession: it drives phases 1 and 2 from its optimizer hooks
(``begin``, ``measure``) with the model's ``(name, parameter)`` pairs, phase 3's reporters
(its spike detector) with ``report`` on each written step, and writes its snapshots with the
same call (``snapshot``). After the last phase the stack tells the step on its own event
signal, ``events`` (``core/stack/events.py``): the app's one event bus.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gradexplorer.core.messages.failures import tell_failure
from gradexplorer.core.stack.events import StackEvents
from gradexplorer.core.stack.observer import SessionObserver, guarded_call

if TYPE_CHECKING:  # imported where used: ``watch`` needs neither the NaN origin nor exporters
    from torch import nn

    from gradexplorer.core.diagnose.nan_origin import NonFiniteOrigin
    from gradexplorer.core.hooks.registry import HookRegistry
    from gradexplorer.core.snapshot.exporter import SnapshotExporter
    from gradexplorer.core.stats.monitor import GradientMonitor
    from gradexplorer.core.stats.records import StepGradients


@dataclass(eq=False)
class SessionStack:
    """A session's monitor, hook registry, NaN-origin finder, reporters and publishers, run in
    the phase order above (every part optional; ``reporters`` and ``publishers`` are observers
    with an ``after_step(session, result)``: ``SessionObserver``s; one that raises is one
    warning, and the parts after it still run)."""

    monitor: GradientMonitor | None = None
    hooks: HookRegistry | None = None
    origin: NonFiniteOrigin | None = None
    reporters: list[SessionObserver] = field(default_factory=list)
    publishers: list[SessionObserver] = field(default_factory=list)
    events: StackEvents = field(default_factory=StackEvents)  # core/stack/events.py: the bus
    _warned: set = field(default_factory=set, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.hooks is not None:  # the registry's events on the bus (once a bus)
            self.events.relay_hooks(self.hooks)

    @classmethod
    def on(cls, session, monitor: GradientMonitor | None = None, hooks: HookRegistry | None = None,
           *, origin: bool = True, reporters: tuple = (), publishers: tuple = (),
           events: StackEvents | None = None) -> SessionStack:
        """The stack of ``session``, installed: its one observer (``origin``: find where a
        step's NaN/Inf was born). With a monitor the session leaves the global norm to it.
        ``events``: the bus to emit on (the app's, kept from stack to stack), else its own."""
        from gradexplorer.core.diagnose.nan_origin import NonFiniteOrigin

        stack = cls(monitor, hooks, NonFiniteOrigin(session, monitor) if origin else None,
                    list(reporters), list(publishers), events or StackEvents())
        if stack.origin is not None:
            stack.events.relay(stack.origin.event)  # where a NaN/Inf was born: the event log
        stack.install(session)
        return stack

    def install(self, session) -> None:
        """Observe ``session`` (once); the hook registry recovers from hook errors in its steps
        and reports through this stack, not as an observer of its own."""
        if self.hooks is not None:
            self.hooks.install(session, observe=False)  # its phases are this stack's
            session.remove_observer(self.hooks)  # where it was installed on its own before
        if self.monitor is not None:
            session.config.grad_norm = False  # the monitor reports the global norm itself
        if self not in session.observers:
            session.add_observer(self)

    # -- the phases ----------------------------------------------------------------
    def after_backward(self, session, step: int) -> None:
        """Phase 1 for a TrainingSession (``step``: steps done before this one)."""
        if self.hooks is not None:
            self.hooks.end_backward()
        if self.monitor is not None:
            self.monitor.after_backward(session, step)
        if self.origin is not None:
            self.origin.after_backward(session, step)

    def begin(self, named: list[tuple[str, nn.Parameter]], optimizer, step: int) -> None:
        """Phase 1's measuring without a session (``watch``): the monitor begins step ``step``
        (1-based) of ``named``."""
        if self.monitor is not None:
            self.monitor.begin(named, optimizer, step)

    def measure(self, optimizer, step: int) -> StepGradients | None:
        """Phase 2 without a session (``watch``): the monitor's figures of step ``step`` (None
        without a monitor or a ``begin``)."""
        return None if self.monitor is None else self.monitor.finish(optimizer, step)

    def after_step(self, session, result) -> None:
        """Phases 2 to 4 for a TrainingSession's ``result``."""
        if self.monitor is not None:  # its figures in result.gradients (and the global norm)
            self.monitor.after_step(session, result)
        if self.hooks is not None:
            self.hooks.after_step(session, result)
        if self.origin is not None:
            self.origin.after_step(session, result)
        self.report(session, result)

    def report(self, session, result) -> None:
        """Phase 3's reporters and phase 4, in order, on a result already measured (``watch``
        calls it with no session, on each written step: its spike reporter)."""
        for part in [*self.reporters, *self.publishers]:  # one failing part: one warning
            guarded_call(part, "after_step", part.after_step, session, result, result.step,
                         self._warned, self.tell)
        self.events.step_done(result)

    def tell(self, line: str) -> None:
        """The stack's failure channel: one MonitorWarning, and ``failed`` on the bus (the
        caller says each cause once: ``guarded_call``'s set, a reporter that stops)."""
        tell_failure(line, stacklevel=4)
        self.events.fail(line)

    # -- snapshots -------------------------------------------------------------------
    def snapshot(self, directory: str | os.PathLike, source, record: StepGradients | None,
                 diagnosis: dict | None = None, replace: bool = True) -> Path:
        """The one snapshot call of every entry point: ``source`` (a TrainingSession or a
        ``SnapshotSource``) with this stack's hooks and history (``write_step_snapshot``)."""
        from gradexplorer.core.snapshot.write import SnapshotSource, write_step_snapshot

        return write_step_snapshot(
            directory, SnapshotSource.of(source), record, self.hooks,
            history=self.monitor.history if self.monitor is not None else None,
            diagnosis=diagnosis, replace=replace)

    def exporter(self, directory: str | os.PathLike, snapshot_every: int = 0,
                 last_step: int | None = None, keep_snapshots: int | None = None,
                 wrote: Callable[[int, Path], None] | None = None) -> SnapshotExporter:
        """A snapshot exporter writing with this stack's hooks and history, published after
        each step (``stop_exporting`` ends it)."""
        from gradexplorer.core.snapshot.exporter import SnapshotExporter

        exporter = SnapshotExporter(directory, self.monitor, snapshot_every, last_step,
                                    registry=self.hooks, keep_snapshots=keep_snapshots)
        events = self.events  # each snapshot written: a line of the event log on the bus
        exporter.wrote.connect(lambda step, path: events.tell("snapshot", "", f"snapshot {path}"))
        if wrote is not None:
            exporter.wrote.connect(wrote)
        self.publishers.insert(len([p for p in self.publishers
                                    if isinstance(p, SnapshotExporter)]), exporter)
        return exporter

    def stop_exporting(self, exporter: SnapshotExporter) -> None:
        """Stop publishing ``exporter``."""
        if exporter in self.publishers:
            self.publishers.remove(exporter)


def origin_of(session) -> NonFiniteOrigin | None:
    """The NaN-origin finder observing ``session`` (in its stack, or on its own), or None."""
    from gradexplorer.core.diagnose.nan_origin import NonFiniteOrigin

    for observer in session.observers:
        found = observer.origin if isinstance(observer, SessionStack) else observer
        if isinstance(found, NonFiniteOrigin):
            return found
    return None
