"""Thin adapters that put ``gradexplorer.watch`` into training frameworks.

Each is imported only when used, so neither Lightning nor transformers is needed otherwise::

    from gradexplorer.integrations import GradexplorerLightningCallback   # imports lightning
    from gradexplorer.integrations import GradexplorerTrainerCallback     # imports transformers
"""

from __future__ import annotations

import importlib
from typing import Any

_ADAPTERS = {
    "GradexplorerLightningCallback": "gradexplorer.integrations.lightning",
    "GradexplorerTrainerCallback": "gradexplorer.integrations.transformers",
}
__all__ = sorted(_ADAPTERS)


def __getattr__(name: str) -> Any:
    module = _ADAPTERS.get(name)
    if module is None:
        raise AttributeError(f"module 'gradexplorer.integrations' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
