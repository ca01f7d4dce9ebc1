"""Where a gradient goes wrong: NaN/Inf origin, gradient tracing through the graph, spikes,
plain-language explanations.

Documented in ``docs/api.md``; names load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gradexplorer._lazy import lazy_names

__all__ = [
    "KeptGradients",
    "NonFiniteOrigin",
    "SpikeEvent",
    "SpikeObserver",
    "SpikeSettings",
    "NoiseSettings",
    "diagnose_step",
    "explain_graph",
    "nonfinite_origin",
    "trace_gradients",
]

__getattr__, __dir__ = lazy_names(__name__, {
    "KeptGradients": "gradexplorer.core.diagnose.kept_grads",
    "trace_gradients": "gradexplorer.core.diagnose.trace_grads",
    "nonfinite_origin": "gradexplorer.core.diagnose.nan_origin",
    "diagnose_step": "gradexplorer.core.diagnose.nan_origin",
    "NonFiniteOrigin": "gradexplorer.core.diagnose.nan_origin",
    "explain_graph": "gradexplorer.core.diagnose.explain",
    "SpikeSettings": "gradexplorer.core.diagnose.spike_band",
    "NoiseSettings": "gradexplorer.core.watch.noise_watch",
    "SpikeEvent": "gradexplorer.core.diagnose.spikes",
    "SpikeObserver": "gradexplorer.core.diagnose.spike_observer",
})

if TYPE_CHECKING:  # for type checkers and IDEs; at run time names load lazily above
    from gradexplorer.core.diagnose.explain import explain_graph
    from gradexplorer.core.diagnose.kept_grads import KeptGradients
    from gradexplorer.core.diagnose.nan_origin import NonFiniteOrigin, diagnose_step, nonfinite_origin
    from gradexplorer.core.diagnose.spike_band import SpikeSettings
    from gradexplorer.core.diagnose.spike_observer import SpikeObserver
    from gradexplorer.core.diagnose.spikes import SpikeEvent
    from gradexplorer.core.diagnose.trace_grads import trace_gradients
    from gradexplorer.core.watch.noise_watch import NoiseSettings
