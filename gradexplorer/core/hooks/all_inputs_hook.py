"""A full backward hook that sees every tensor a module receives, however it is passed.

``register_full_backward_hook`` only wraps positional arguments: a module called by keyword,
as transformers calls attention (``self_attn(hidden_states=..., ...)``), gets
``grad_input == (None,)`` and a hook that returns new gradients changes nothing.
``register_all_inputs_hook`` gives the same hook — same ``(module, grad_input, grad_output)``
call, same ``BackwardHookFunctionBackward`` nodes, same rules — through PyTorch's own
``torch.utils.hooks.BackwardHook``, set up from a forward pre-hook (``with_kwargs=True``) and a
forward hook instead of from inside ``Module.__call__``.

``grad_input`` holds one entry per positional argument, exactly as a full backward hook's (None
where the argument is not a tensor or needs no gradient), followed by one entry per
floating-point tensor passed by keyword or inside a tuple, list or dict (positional arguments'
first, then the keyword ones, in the order they were passed). All of them go through one
autograd node, so the hook sees the whole ``grad_input`` at once and what it returns replaces
every entry.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import BackwardHook

MARK = "_gradexplorer_all_inputs_hook"  # set on the forward (pre-)hooks this module registers

Leaves = list[torch.Tensor]


def _carries_gradient(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex())


def _collect(value: Any, leaves: Leaves) -> bool:
    """Append the floating-point tensors inside ``value`` (nested tuples, lists, dicts) to
    ``leaves``; True when there was one."""
    if _carries_gradient(value):
        leaves.append(value)
        return True
    if isinstance(value, (tuple, list)):
        return any([_collect(v, leaves) for v in value])
    if isinstance(value, dict):
        return any([_collect(v, leaves) for v in value.values()])
    return False


def _rebuild(value: Any, leaves: Any) -> Any:
    """``value`` with its floating-point tensors replaced, in order, by ``next(leaves)``."""
    if _carries_gradient(value):
        return next(leaves)
    if isinstance(value, (tuple, list)):
        items = [_rebuild(v, leaves) for v in value]
        if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple
            return type(value)(*items)
        return type(value)(items)
    if isinstance(value, dict):
        rebuilt = {k: _rebuild(v, leaves) for k, v in value.items()}
        return rebuilt if type(value) is dict else type(value)(rebuilt)
    return value


def extra_inputs(args: tuple, kwargs: dict) -> tuple[Leaves, list[tuple[int | str, Any]]]:
    """The floating-point tensors a full backward hook misses (passed by keyword or inside a
    tuple, list or dict), in order, and the ``(position or keyword, value)`` holding them."""
    extras: Leaves = []
    holders: list[tuple[int | str, Any]] = []
    for index, arg in enumerate(args):
        if not isinstance(arg, torch.Tensor) and _collect(arg, extras):
            holders.append((index, arg))
    for key, value in kwargs.items():
        if _collect(value, extras):
            holders.append((key, value))
    return extras, holders


def hooked_inputs(args: tuple, kwargs: dict) -> Leaves:
    """The tensors ``register_all_inputs_hook`` wraps on a call: the positional tensors, as a
    full backward hook does, and ``extra_inputs``."""
    return [a for a in args if isinstance(a, torch.Tensor)] + extra_inputs(args, kwargs)[0]


class _Calls(threading.local):
    """The BackwardHook of each call in progress on this thread (a stack: calls may nest)."""

    def __init__(self) -> None:
        self.stack: list[BackwardHook | None] = []


class AllInputsHookHandle:
    """Removes the two forward hooks behind one ``register_all_inputs_hook``."""

    def __init__(self, handles: tuple) -> None:
        self._handles = handles

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()


def register_all_inputs_hook(
    module: nn.Module, hook: Callable[[nn.Module, tuple, tuple], Any]
) -> AllInputsHookHandle:
    """Attach ``hook(module, grad_input, grad_output)`` as a full backward hook whose
    ``grad_input`` also covers keyword and nested tensor inputs (see the module docstring)."""
    calls = _Calls()

    def before(mod: nn.Module, args: tuple, kwargs: dict):
        backward_hook = BackwardHook(mod, [hook], [])
        calls.stack.append(backward_hook)
        extras, nested = extra_inputs(args, kwargs)
        virtual = (*args, *extras)
        wrapped = backward_hook.setup_input_hook(virtual)
        if backward_hook.input_tensors_index is None:
            return None  # nothing needs a gradient here (or grad mode is off)
        new_args, new_kwargs = list(wrapped[: len(args)]), dict(kwargs)
        replacements = iter(wrapped[len(args):])
        for where, value in nested:
            if isinstance(where, int):
                new_args[where] = _rebuild(value, replacements)
            else:
                new_kwargs[where] = _rebuild(value, replacements)
        return tuple(new_args), new_kwargs

    def after(mod: nn.Module, args: tuple, output: Any):
        # always_call: also runs when the forward raised (output None), so the stack stays true
        backward_hook = calls.stack.pop() if calls.stack else None
        if backward_hook is None or output is None:
            return None
        if not isinstance(output, (torch.Tensor, tuple)):
            warnings.warn("For backward hooks to be called, module output should be a Tensor or "
                          f"a tuple of Tensors but received {type(output)}", stacklevel=2)
        return backward_hook.setup_output_hook(output)

    setattr(before, MARK, True)
    setattr(after, MARK, True)
    return AllInputsHookHandle((
        module.register_forward_pre_hook(before, with_kwargs=True),
        module.register_forward_hook(after, always_call=True),
    ))


def is_all_inputs_hook(fn: Any) -> bool:
    """Whether ``fn`` is one of the forward (pre-)hooks ``register_all_inputs_hook`` adds."""
    return getattr(fn, MARK, False) is True


def has_all_inputs_hook(module: nn.Module) -> bool:
    """Whether ``module`` carries a ``register_all_inputs_hook`` hook."""
    return any(is_all_inputs_hook(fn) for fn in module._forward_pre_hooks.values())
