"""Headless engine of gradexplorer; nothing under ``gradexplorer.core`` imports Qt.

The parts, each a subpackage:

- ``model``: what to train — specs, examples, user code, weights, ``Workload``.
- ``session``: running it — ``TrainingSession``, devices, environment facts.
- ``stats``: exact per-parameter gradient statistics and histograms (``GradientMonitor``).
- ``hooks``: full backward hooks by module path (``HookRegistry``) and their actions.
- ``graph``: the backward graph — extraction, attribution, collapse, style, layout, export.
- ``snapshot``: gradients written to disk, read back and compared.

``errors`` (``UserError``) and ``atomic_file`` serve them all. The public API is re-exported from
``gradexplorer`` itself and documented in ``docs/api.md``.
"""
