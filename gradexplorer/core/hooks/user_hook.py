"""``file:PATH.py:FUNCTION``: a user's own full backward hook, with its return value checked."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from gradexplorer.core.hooks.actions import Action
from gradexplorer.core.hooks.failures import HookFailure
from gradexplorer.core.hooks.hookable import display_name
from gradexplorer.core.messages.errors import UserError, first_line
from gradexplorer.core.model.user_code import find_callable, import_file, user_frame

RETURN_RULE = "return None or a tuple with one entry (a tensor or None) per grad_input entry"


class UserHook(Action):
    """Call ``fn(module, grad_input, grad_output)`` and validate what it returns."""

    def __init__(self, spec: str, fn: Callable[..., Any], label: str, module: str) -> None:
        super().__init__(spec)
        self.fn, self.label, self.module = fn, label, module

    @classmethod
    def load(cls, spec: str, target: str, module: str) -> UserHook:
        """Import ``PATH.py:FUNCTION`` (the part of ``spec`` after ``file:``)."""
        path, sep, name = target.rpartition(":")
        if not sep or not path or not name:
            raise UserError(f"bad hook action {spec!r}: use file:path/to/hooks.py:function")
        if not Path(path).expanduser().is_file():
            raise UserError(f"hook file not found: {path}")
        fn = find_callable(import_file(path), name, path)
        return cls(spec, fn, f"{Path(path).name}:{name}", module)

    @classmethod
    def of_callable(cls, fn: Callable[..., Any], module: str) -> UserHook:
        """A hook function given directly (``HookRegistry.attach(path, fn)``), named by its
        qualified name: ``callable:NAME``."""
        if not callable(fn):
            raise UserError(f"a hook action is text (e.g. 'scale:0.5') or a function "
                            f"fn(module, grad_input, grad_output), not {type(fn).__name__}")
        name = getattr(fn, "__qualname__", None) or type(fn).__name__
        return cls(f"callable:{name}", fn, name, module)

    def __call__(self, module, grad_input, grad_output):
        try:
            result = self.fn(module, grad_input, grad_output)
        except Exception as exc:  # noqa: BLE001 - whatever the user's hook raises
            detail = f"it raised at {user_frame(exc)}: {first_line(exc)}"
            where = f"hook {self.label} on '{display_name(self.module)}'"
            raise HookFailure(self.module, f"{where}: {detail}", detail) from exc
        return validate_grad_input(result, grad_input, self.label, self.module)


def validate_grad_input(result: Any, grad_input: tuple, label: str, module: str) -> tuple | None:
    """``result`` if it is a valid replacement for ``grad_input``, else a HookFailure."""
    if result is None:
        return None

    def fail(problem: str) -> HookFailure:
        detail = f"it {problem}; {RETURN_RULE}"
        return HookFailure(module, f"hook {label} on '{display_name(module)}': {detail}", detail)

    if isinstance(result, torch.Tensor):
        raise fail("returned a single tensor instead of a tuple")
    if not isinstance(result, (tuple, list)):
        raise fail(f"returned {type(result).__name__}")
    if len(result) != len(grad_input):
        hint = " (returning (grad_input, grad_output) is a mistake)" if len(result) == 2 else ""
        raise fail(f"returned {len(result)} entries but grad_input has {len(grad_input)}{hint}")
    for i, (new, old) in enumerate(zip(result, grad_input, strict=True)):
        if new is None:
            continue
        if not isinstance(new, torch.Tensor):
            raise fail(f"returned {type(new).__name__} at position {i}")
        if old is None:
            raise fail(f"returned a tensor at position {i} where grad_input[{i}] is None")
        if new.shape != old.shape:
            raise fail(
                f"returned shape {list(new.shape)} at position {i}, expected {list(old.shape)}"
            )
    return tuple(result)
