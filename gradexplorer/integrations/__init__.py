"""Thin adapters that put ``gradexplorer.watch`` into training frameworks.

Each is imported only when used, so neither Lightning nor transformers is needed otherwise::

    from gradexplorer.integrations import GradexplorerLightningCallback   # imports lightning
    from gradexplorer.integrations import GradexplorerTrainerCallback     # imports transformers
"""

from __future__ import annotations

from gradexplorer._lazy import lazy_names

_ADAPTERS = {
    "GradexplorerLightningCallback": "gradexplorer.integrations.lightning",
    "GradexplorerTrainerCallback": "gradexplorer.integrations.transformers",
}
__all__ = sorted(_ADAPTERS)


__getattr__, __dir__ = lazy_names(__name__, _ADAPTERS)
