"""``StackEvents``: a session stack's own event signal, the app's one event bus (psygnal, Qt-free).

Every stack has one (``SessionStack.events``); the app gives each stack of its live session
the same bus (``gui/training/live_session.py``), so its subscribers outlive a change of device
or optimizer. Everything is emitted on the thread that steps (the training thread), by the
stack itself, from what it already holds; a subscriber that raises is one MonitorWarning and
the step goes on (``emit_guarded``). Nothing is emitted to a signal nobody subscribes to
(``watch``'s stack: no cost a step).

- ``measured(result)``: a step's StepResult, finished (every phase run: gradients, hooks,
  NaN origin, reporters, publishers);
- ``spike(event, step)``: ``step`` belongs to the SpikeEvent ``event`` (``result.spike``);
- ``told(kind, module, text)``: one line of the event log: the hook registry's events
  (``attached``, ``detached``, ``failed``…), where a NaN/Inf was born (the NaN origin's), a
  spike's beginning (``spike``), a snapshot written (``snapshot``), a monitor failure
  (``error``);
- ``hooks(table)``: the hooks attached (module -> action) after a hook took itself off
  (detached, failed), right after that hook's ``told``;
- ``failed(line)``: what a stack part could not do (once per cause; also one MonitorWarning).
"""

from __future__ import annotations

from psygnal import Signal

from gradexplorer.core.messages.errors import emit_guarded

HOOK_OFF = ("detached", "failed")  # hook events after which the hook table is published


class StackEvents:
    """The bus; ``relay_hooks(registry)`` tells ``registry``'s events on it (once a registry)."""

    measured = Signal(object)
    spike = Signal(object, int)
    told = Signal(str, str, str)
    hooks = Signal(object)
    failed = Signal(str)

    def __init__(self) -> None:
        self._registry = None

    def relay_hooks(self, registry) -> None:
        """Tell the events of ``registry`` (a HookRegistry) on this bus, with the hook table
        after a hook took itself off."""
        self._registry = registry
        registry.event.connect(self._hook_event, unique=True)

    def relay(self, signal) -> None:
        """Tell ``signal``'s ``(kind, module, text)`` events on this bus (the NaN origin's)."""
        signal.connect(self.tell, unique=True)

    def tell(self, kind: str, module: str, text: str) -> None:
        emit_guarded(self.told, "a subscriber of the event log", kind, module, text)

    def _hook_event(self, kind: str, module: str, text: str) -> None:
        self.tell(kind, module, text)
        if kind in HOOK_OFF and self._registry is not None and len(self.hooks):
            table = {path: hook.action for path, hook in self._registry.attached().items()}
            emit_guarded(self.hooks, "a subscriber of the hook table", table)

    def step_done(self, result) -> None:
        """The stack's last phase is over for ``result``: its spike (and, when one begins,
        the event log's line) and the step itself."""
        event = result.spike
        if event is not None:
            from gradexplorer.core.diagnose.spike_observer import tell_spike

            emit_guarded(self.spike, "a subscriber of the spike events", event, result.step)
            tell_spike(self.tell, event, result.step)
        emit_guarded(self.measured, "a subscriber of the measured steps", result)

    def fail(self, line: str) -> None:
        """A stack part's failure line, on the bus (the stack warns besides) and in the log."""
        emit_guarded(self.failed, "a subscriber of the failures", line)
        self.tell("error", "", line)
