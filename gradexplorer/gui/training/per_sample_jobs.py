"""The app's per-sample gradient norms: attached to and taken off the live session as jobs
between steps, on the training thread (Qt-free)."""

from __future__ import annotations

from dataclasses import dataclass

from gradexplorer.core.persample.observer import PerSampleObserver


@dataclass
class PerSampleChanged:
    """A job's result: the observer now on ``live``'s session (None: taken off)."""

    live: object
    observer: PerSampleObserver | None


def attach(live, reduction: str, old: PerSampleObserver | None = None) -> PerSampleChanged:
    """Per-sample norms on ``live``'s session from its next step (``old`` taken off first)."""
    detach(live, old)
    observer = PerSampleObserver(live.session.model, reduction)
    live.session.add_observer(observer)
    return PerSampleChanged(live, observer)


def detach(live, observer: PerSampleObserver | None) -> PerSampleChanged:
    if observer is not None:
        live.session.remove_observer(observer)
        observer.remove()
    return PerSampleChanged(live, None)
