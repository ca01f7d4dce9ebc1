"""Turn a failing forward pass into one line naming the module and the shapes involved."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from gradexplorer.core.messages.errors import UserError, first_line
from gradexplorer.core.model.training_state import preserved_state
from gradexplorer.core.model.workload import call_model


def describe_shapes(obj: Any) -> str:
    """A compact shape description: ``[10, 10]``, ``([2, 3], [4])``, ``int``."""
    if isinstance(obj, torch.Tensor):
        return str(list(obj.shape))
    if isinstance(obj, (tuple, list)):
        inner = ", ".join(describe_shapes(o) for o in obj)
        return f"({inner})" if len(obj) != 1 else inner
    if isinstance(obj, dict):
        return "{" + ", ".join(f"{k}: {describe_shapes(v)}" for k, v in obj.items()) + "}"
    return type(obj).__name__


def locate_forward_failure(model: nn.Module, inputs: tuple | dict) -> UserError | None:
    """Re-run the forward pass with tracking hooks; None if it now succeeds.

    Buffers and random streams are restored afterwards: the diagnosis leaves no trace.
    """
    names = {m: n for n, m in model.named_modules()}
    stack: list[tuple[nn.Module, Any]] = []

    def pre(module: nn.Module, args: Any) -> None:
        stack.append((module, args))

    def post(module: nn.Module, args: Any, output: Any) -> None:
        if stack and stack[-1][0] is module:
            stack.pop()

    handles = []
    for module in names:
        handles.append(module.register_forward_pre_hook(pre))
        handles.append(module.register_forward_hook(post))
    try:
        with preserved_state(model), torch.no_grad():
            call_model(model, inputs)
    except Exception as exc:  # noqa: BLE001 - any failure is the user's model's
        return forward_error(model, names, stack, inputs, exc)
    finally:
        for h in handles:
            h.remove()
    return None


def forward_error(model, names, stack, inputs, exc: BaseException) -> UserError:
    """Build the message for a forward failure seen while ``stack`` was entered."""
    where = "the model's forward"
    if stack:
        module, args = stack[-1]
        name = names.get(module) or "<root>"
        where = f"module '{name}' ({type(module).__name__})"
        detail = f"input shapes to it: {describe_shapes(args)}"
        params = [f"{n} {list(p.shape)}" for n, p in module.named_parameters(recurse=False)]
        if params:
            detail += "; its parameters: " + ", ".join(params)
    else:
        detail = f"model input shapes: {describe_shapes(inputs)}"
    return UserError(f"forward pass failed in {where}: {first_line(exc)}; {detail}")
