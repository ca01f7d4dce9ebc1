"""torch's SGD and Adam as the session steps them: eagerly, without importing ``torch._dynamo``.

torch.optim wraps an optimizer's ``add_param_group``, ``zero_grad``, ``state_dict`` and
``load_state_dict`` in ``torch._disable_dynamo`` and its ``step`` in
``_use_grad_for_differentiable`` (grad mode set to the ``differentiable`` option, a graph
break either side), for torch.compile. Outside a compiled frame those wrappers only set the
grad mode, yet the first call of any of them imports ``torch._dynamo`` (sympy, torch.fx's
symbolic shapes, inductor's lists: 1.3 s of CPU, the biggest part of the app's start before
the first step). The session's step is never compiled, so its optimizers call torch's own
methods from inside those wrappers: the same code on the same tensors, the same figures bit
for bit (tests/test_eager_optimizers.py), step hooks and profiler names as torch's (the
classes keep torch's names). ``torch._dynamo`` is imported when something else needs it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.optim import Optimizer

_COMPILE_WRAPPED = ("add_param_group", "zero_grad", "state_dict", "load_state_dict")
# torch's wrappers peeled off, by the name of their code: torch._disable_dynamo's, the step's
# grad-mode one, and the step hooks' one (which torch puts back on our class's own step)
_WRAPPERS = {"inner", "_use_grad", "wrapper"}
_TORCH = str(Path(torch.__file__).parent)


def _unwrapped(method: Callable) -> Callable:
    """The function inside torch's own wrappers (``functools.wraps`` keeps it as
    ``__wrapped__``); any other wrapper is kept, so a torch that wraps differently gets its
    methods as they are (then slower to start, never different)."""
    while hasattr(method, "__wrapped__") and method.__code__.co_name in _WRAPPERS \
            and method.__code__.co_filename.startswith(_TORCH):
        method = method.__wrapped__
    return method


def _eager_step(torch_step: Callable) -> Callable:
    """``torch_step`` in the grad mode ``_use_grad_for_differentiable`` sets, without its graph
    breaks (no-ops outside torch.compile) and so without its import of ``torch._dynamo``."""
    inner = _unwrapped(torch_step)

    @functools.wraps(inner)
    def step(self: Optimizer, *args: Any, **kwargs: Any) -> Any:
        before = torch.is_grad_enabled()
        try:
            torch.set_grad_enabled(self.defaults["differentiable"])
            return inner(self, *args, **kwargs)
        finally:
            torch.set_grad_enabled(before)

    return step


def _eager(torch_class: type[Optimizer]) -> type[Optimizer]:
    """A subclass of ``torch_class`` under its name whose wrapped methods run unwrapped."""
    methods = {name: _unwrapped(getattr(Optimizer, name)) for name in _COMPILE_WRAPPED}
    methods["step"] = _eager_step(torch_class.step)
    methods["__module__"] = __name__
    methods["__qualname__"] = torch_class.__qualname__
    methods["__doc__"] = f"``torch.optim.{torch_class.__name__}`` stepped eagerly (see the module)."
    return type(torch_class.__name__, (torch_class,), methods)


SGD = _eager(torch.optim.SGD)
Adam = _eager(torch.optim.Adam)
