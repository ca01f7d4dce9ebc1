"""The random state of a step, to replay it (NaN origin) or to run two arms in lockstep (A/B)."""

from __future__ import annotations

import torch


def rng_snapshot(device: torch.device | None = None) -> dict:
    """The CPU (and CUDA) random state, to replay a step's forward with ``restore_rng``."""
    cuda = device is not None and device.type == "cuda" and torch.cuda.is_available()
    return {"cpu": torch.random.get_rng_state(), "cuda": torch.cuda.get_rng_state_all() if cuda else None}


def restore_rng(state: dict) -> None:
    """Set the random state ``rng_snapshot`` took."""
    torch.random.set_rng_state(state["cpu"])
    if state.get("cuda") is not None:
        torch.cuda.set_rng_state_all(state["cuda"])
