"""The random state of a step, to replay it (NaN origin), redo it (a hook that broke it) or to
run two arms in lockstep (A/B)."""

from __future__ import annotations

import torch


def rng_snapshot(device: torch.device | None = None) -> dict:
    """The CPU random state, and CUDA's (every device) when the step runs there or CUDA is in
    use, and MPS's when the step runs there: to replay a step's forward with ``restore_rng``."""
    on = device.type if device is not None else "cpu"
    cuda = torch.cuda.is_available() and (on == "cuda" or torch.cuda.is_initialized())
    return {"cpu": torch.random.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if cuda else None,
            "mps": torch.mps.get_rng_state() if on == "mps" else None}


def restore_rng(state: dict) -> None:
    """Set the random state ``rng_snapshot`` took."""
    torch.random.set_rng_state(state["cpu"])
    if state.get("cuda") is not None:
        torch.cuda.set_rng_state_all(state["cuda"])
    if state.get("mps") is not None:
        torch.mps.set_rng_state(state["mps"])
