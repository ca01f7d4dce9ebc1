"""What a training step needs: a model, a batch maker and a loss."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from gradexplorer.core.messages.errors import UserError

Batch = tuple[Any, Any]
ModelInputs = tuple | dict  # positional arguments, or keyword arguments, of ``model(...)``


@dataclass
class Workload:
    """A model with the data and loss that drive its training steps.

    ``make_batch(step) -> (inputs, target)``: ``inputs`` is a tensor or a tuple of tensors
    passed positionally to the model, or a dict passed as keyword arguments (transformers
    style); ``make_batch`` may also return that dict alone (no target).
    ``loss_fn(output, target)`` returns a scalar tensor; ``loss_fn=None`` takes the loss from
    the model's output (``output.loss``, ``output["loss"]`` or a scalar output).
    ``extra["optimizer_defaults"]``, e.g. ``{"sgd": {"lr": 0.1, "momentum": 0.9}}``, suggests
    settings used when the user gives none.
    """

    model: nn.Module
    make_batch: Callable[[int], Batch]
    loss_fn: Callable[[Any, Any], torch.Tensor] | None
    name: str = ""
    description: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.model, nn.Module):
            raise TypeError(f"Workload.model must be an nn.Module, got {type(self.model).__name__}")
        if not callable(self.make_batch):
            raise TypeError("Workload.make_batch must be callable: make_batch(step) -> (inputs, target)")
        if self.loss_fn is not None and not callable(self.loss_fn):
            raise TypeError("Workload.loss_fn must be callable: loss_fn(output, target) -> scalar, "
                            "or None to take the loss from the model's output")


def split_batch(batch: Any) -> Batch:
    """``(inputs, target)`` of what ``make_batch`` returned (a dict alone has no target)."""
    if isinstance(batch, dict):
        return batch, None
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        raise UserError("make_batch(step) must return (inputs, target) or a dict of keyword inputs, "
                        f"got {type(batch).__name__}")
    return batch[0], batch[1]


def as_model_inputs(inputs: Any) -> ModelInputs:
    """A dict stays keyword arguments; anything else becomes the tuple of positional ones."""
    return dict(inputs) if isinstance(inputs, dict) else as_input_tuple(inputs)


def call_model(model: nn.Module, inputs: ModelInputs) -> Any:
    """``model(**inputs)`` for a dict, ``model(*inputs)`` otherwise."""
    return model(**inputs) if isinstance(inputs, dict) else model(*inputs)


def loss_from_output(output: Any) -> Any:
    """The loss a model reports itself: ``output.loss``, ``output["loss"]`` or a scalar output."""
    if isinstance(output, torch.Tensor):
        if output.numel() == 1:
            return output
        raise UserError(f"loss_fn is None but the model's output has shape {list(output.shape)}; "
                        "give a loss_fn or return a scalar loss")
    loss = output.get("loss") if isinstance(output, dict) else getattr(output, "loss", None)
    if loss is None:
        raise UserError(f"loss_fn is None but the model's output ({type(output).__name__}) has no "
                        "loss; pass labels in the inputs or give a loss_fn")
    return loss


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
