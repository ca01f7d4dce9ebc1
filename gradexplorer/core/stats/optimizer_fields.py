"""The optimizer-state figures by name, their column labels and one parameter's figures as
stored (no torch: the app's table and a run's reader use them before torch is imported;
``optimizer_state`` reads the figures from an optimizer)."""

from __future__ import annotations

from dataclasses import dataclass, fields

STATE_FIELDS = ("lr", "exp_avg_norm", "exp_avg_sq_rms", "effective_lr", "momentum_norm")
STATE_LABELS = {"lr": "lr", "exp_avg_norm": "‖m‖", "exp_avg_sq_rms": "RMS √v̂",
                "effective_lr": "eff. lr", "momentum_norm": "‖momentum‖"}


@dataclass
class ParamOptimState:
    """One parameter's optimizer state after a step (None where the optimizer keeps none)."""

    name: str
    lr: float | None = None
    exp_avg_norm: float | None = None
    exp_avg_sq_rms: float | None = None
    effective_lr: float | None = None
    momentum_norm: float | None = None

    def state_dict(self) -> dict[str, float | None]:
        """The figures named in STATE_FIELDS."""
        return {f: getattr(self, f) for f in STATE_FIELDS}


def state_from_row(name: str, row: dict) -> ParamOptimState:
    """A ParamOptimState from stored figures (missing ones None)."""
    return ParamOptimState(name, **{k: row.get(k) for k in _STORED})


_STORED = tuple(f.name for f in fields(ParamOptimState) if f.name != "name")  # state_from_row's
