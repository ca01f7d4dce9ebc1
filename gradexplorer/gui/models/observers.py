"""Stopping every observer of a model: its window is closing.

A view connects to a model's signals for as long as the view lives; a model can outlive the
window that showed it (a test, a script or a run still being read holds it), and a slot whose
widget Qt has deleted raises when the model next emits. The window therefore ends every
connection to its models when it closes (``MainWindow.closeEvent``).
"""

from __future__ import annotations

from psygnal import Signal, SignalInstance


def signals_of(model: object) -> list[SignalInstance]:
    """Every psygnal signal ``model`` declares (its class's and its bases')."""
    names = {name for klass in type(model).__mro__ for name, value in vars(klass).items()
             if isinstance(value, Signal)}
    return [getattr(model, name) for name in sorted(names)]


def disconnect_observers(*models: object) -> None:
    """Disconnect every slot from every signal of each of ``models``."""
    for model in models:
        for signal in signals_of(model):
            signal.disconnect()
