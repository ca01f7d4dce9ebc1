"""``SessionObserver``: what a TrainingSession calls on its observers, and the dispatch of it.

An observer implements either hook or both (``SessionStack``, the one observer the app,
``run``, ``watch`` and A/B give a session, implements both). The hooks an observer has are
looked up once, when it is added (``ObserverHooks.add``), not on every step. A hook that
raises is one ``MonitorWarning`` (once per observer, hook and cause) and the step goes on:
a monitor never breaks the loop it watches. A ``UserError`` (a problem the user must fix)
still ends the step.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from gradexplorer.core.messages.errors import UserError, first_line
from gradexplorer.core.messages.failures import MonitorWarning


@runtime_checkable
class SessionObserver(Protocol):
    """The two hooks of a session observer; either may be left out."""

    def after_backward(self, session: Any, step: int) -> None:
        """Gradients complete, the optimizer not yet stepped (``step``: steps done before)."""

    def after_step(self, session: Any, result: Any) -> None:
        """The optimizer has stepped; ``result`` is the step's StepResult, to read or fill."""


class ObserverHooks:
    """A session's observers, in the order added, and their hooks resolved once."""

    def __init__(self) -> None:
        self.observers: list[SessionObserver] = []
        self._after_backward: list[tuple[SessionObserver, Callable[[Any, int], None]]] = []
        self._after_step: list[tuple[SessionObserver, Callable[[Any, Any], None]]] = []
        self._warned: set = set()

    def add(self, observer: SessionObserver) -> None:
        """Observe with ``observer``: its ``after_backward`` / ``after_step``, whichever it has."""
        self.observers.append(observer)
        backward = getattr(observer, "after_backward", None)
        if callable(backward):
            self._after_backward.append((observer, backward))
        step = getattr(observer, "after_step", None)
        if callable(step):
            self._after_step.append((observer, step))

    def remove(self, observer: SessionObserver) -> None:
        """Stop observing with ``observer`` (nothing where it does not observe)."""
        if observer in self.observers:
            self.observers.remove(observer)
            self._after_backward = [h for h in self._after_backward if h[0] is not observer]
            self._after_step = [h for h in self._after_step if h[0] is not observer]

    def after_backward(self, session: Any, step: int) -> None:
        for observer, hook in self._after_backward:
            guarded_call(observer, "after_backward", hook, session, step, step + 1,
                         self._warned)

    def after_step(self, session: Any, result: Any) -> None:
        for observer, hook in self._after_step:
            guarded_call(observer, "after_step", hook, session, result, result.step,
                         self._warned)



def guarded_call(observer: object, name: str, hook: Callable[[Any, Any], None], session: Any,
                 arg: Any, step: int, warned: set, tell: Callable[[str], None] | None = None) -> None:
    """``hook(session, arg)``, ``observer``'s hook ``name``; where it raises (not a UserError),
    one ``MonitorWarning`` per observer type, hook and cause (``warned``: the caller's set;
    ``tell(line)``: the caller's failure channel instead, a stack's ``tell``)."""
    try:
        hook(session, arg)
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - an observer never breaks the training
        what, cause = f"{type(observer).__name__}.{name}", first_line(exc)
        if (what, cause) not in warned:  # once, however many steps repeat it
            warned.add((what, cause))
            line = f"gradexplorer: the session observer {what} failed at step {step} " \
                   f"({cause}); training goes on"
            if tell is not None:
                tell(line)
            else:
                warnings.warn(line, MonitorWarning, stacklevel=4)
