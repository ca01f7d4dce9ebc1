"""The optimizer's state as parameter-table columns (hidden until asked for): lr, ‖m‖, RMS √v̂,
effective lr and ‖momentum‖ after the newest step (core optimizer_state's figures)."""

from __future__ import annotations

from typing import Any

from gradexplorer.core.stats.optimizer_fields import STATE_FIELDS, STATE_LABELS
from gradexplorer.gui.text.number_text import format_number

OPTIMIZER_COLUMNS = tuple(STATE_LABELS[f] for f in STATE_FIELDS)
TOOLTIPS = {"lr": "learning rate of the parameter's group",
            "‖m‖": "norm of Adam's first moment (exp_avg)",
            "RMS √v̂": "RMS of √v̂, Adam's bias-corrected second moment",
            "eff. lr": "mean over elements of lr / (√v̂ + ε): the step size Adam gives",
            "‖momentum‖": "norm of SGD's momentum buffer"}


def optimizer_cells(state: Any) -> tuple[str, ...]:
    """One row's texts ("" where the optimizer keeps no such state)."""
    if state is None:
        return ("",) * len(STATE_FIELDS)
    return tuple(format_number(getattr(state, f), 3) for f in STATE_FIELDS)


def optimizer_value(state: Any, column: int) -> float:
    """Sort key of one cell (-1 when unknown)."""
    value = None if state is None else getattr(state, STATE_FIELDS[column])
    return -1.0 if value is None else value
