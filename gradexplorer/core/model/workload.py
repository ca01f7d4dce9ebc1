"""What a training step needs: a model, a batch maker and a loss."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

Batch = tuple[Any, Any]


@dataclass
class Workload:
    """A model with the data and loss that drive its training steps.

    ``make_batch(step) -> (inputs, target)``: ``inputs`` is a tensor or a tuple of tensors
    passed positionally to the model; ``loss_fn(output, target)`` returns a scalar tensor.
    ``extra["optimizer_defaults"]``, e.g. ``{"sgd": {"lr": 0.1, "momentum": 0.9}}``, suggests
    settings used when the user gives none.
    """

    model: nn.Module
    make_batch: Callable[[int], Batch]
    loss_fn: Callable[[Any, Any], torch.Tensor]
    name: str = ""
    description: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.model, nn.Module):
            raise TypeError(f"Workload.model must be an nn.Module, got {type(self.model).__name__}")
        if not callable(self.make_batch):
            raise TypeError("Workload.make_batch must be callable: make_batch(step) -> (inputs, target)")
        if not callable(self.loss_fn):
            raise TypeError("Workload.loss_fn must be callable: loss_fn(output, target) -> scalar")


def as_input_tuple(inputs: Any) -> tuple:
    """Inputs as the tuple of positional arguments for the model."""
    return tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)


def move_to(obj: Any, device: torch.device) -> Any:
    """Move a tensor, or tensors nested in tuples/lists/dicts, to ``device``."""
    if isinstance(obj, torch.Tensor):
        return obj.to(device, non_blocking=True)
    if isinstance(obj, (tuple, list)):
        return type(obj)(move_to(o, device) for o in obj)
    if isinstance(obj, dict):
        return {k: move_to(v, device) for k, v in obj.items()}
    return obj
