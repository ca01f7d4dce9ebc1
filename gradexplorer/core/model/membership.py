"""Which module a node, a submodule or a parameter belongs to: one rule for every view.

A dotted path belongs to module ``M`` when it is ``M`` or lies under it (``M.x``, ``M.x.y``);
everything belongs to the root module ``""``. A module's parameters are those of the module
and of all its submodules, in the model's order, so a module without direct parameters (a
residual block, a ``Sequential``) shows the parameters of what it contains.
"""

from __future__ import annotations

from collections.abc import Iterable


def in_module(path: str | None, module: str) -> bool:
    """Whether ``path`` (a module path, or a parameter's owner) is ``module`` or lies under it."""
    path = path or ""
    return not module or path == module or path.startswith(module + ".")


def owner_of(param: str) -> str:
    """The module path that holds parameter ``param`` (``"fc1"`` for ``"fc1.weight"``)."""
    return param.rpartition(".")[0]


def module_parameters(param_names: Iterable[str], module: str) -> list[str]:
    """The parameters of ``module`` and its submodules, in the given (model) order."""
    return [name for name in param_names if in_module(owner_of(name), module)]
