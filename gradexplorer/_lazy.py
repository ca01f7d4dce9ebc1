"""Names a package exports, each imported from its module when first asked for: ``import
gradexplorer`` (or one of its namespaces) stays cheap, and the command line starts without torch.

One helper for every lazy package (``gradexplorer``, its namespaces, ``core.hooks``,
``core.snapshot``, ``integrations``)::

    __getattr__, __dir__ = lazy_names(__name__, {"Run": "gradexplorer.core.runs.run"})

``moved``: old names kept one release as deprecated aliases (name -> where it lives now, as
``"gradexplorer.session"``): reading one warns with a DeprecationWarning that says where it went.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable
from typing import Any


def lazy_names(package: str, homes: dict[str, str], moved: dict[str, str] | None = None
               ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module ``__getattr__`` and ``__dir__`` for ``package``: ``homes`` maps each name to the
    module that defines it (a name that is itself a submodule maps to that module's path: the
    module is returned); found names are kept in the package's globals, so each loads once."""
    moved = moved or {}

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None and name in moved:
            warnings.warn(f"{package}.{name} is deprecated: use {moved[name]}.{name} "
                          f"(the old name goes in the next release)", DeprecationWarning, stacklevel=2)
            return getattr(importlib.import_module(moved[name]), name)  # warns every time
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(home)
        value = module if home == f"{package}.{name}" else getattr(module, name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(homes))

    return __getattr__, __dir__
