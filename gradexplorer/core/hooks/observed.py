"""What ``observe`` hooks saw in the latest step, as plain records another thread may hold.

``ObserveReporter`` is a session observer: after each step it turns every observe hook's
grad_input/grad_output into statistics and float64 histograms (numbers, no tensors) in
``result.observed``, so a GUI reads them from the step result, never from the hook.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from gradexplorer.core.hooks.actions import Observe, Once
from gradexplorer.core.stats.histogram import histogram_edges
from gradexplorer.core.stats.records import Histogram


@dataclass(frozen=True)
class ObservedGrads:
    """One observed module's gradients in one step: statistics per entry and histograms."""

    module: str
    step: int
    calls: int
    grad_input: list[dict[str, Any] | None]
    grad_output: list[dict[str, Any] | None]
    histograms: dict[str, Histogram] = field(default_factory=dict)  # "grad_output.0" -> …


def tensor_histogram(tensor: torch.Tensor, bins: int = 64) -> Histogram:
    """Float64 histogram of a tensor's finite values over their own range; NaN/Inf apart."""
    values = tensor.detach().to("cpu", torch.float64).reshape(-1).numpy()
    finite = np.isfinite(values)
    kept = values[finite]
    lo, hi = (float(kept.min()), float(kept.max())) if kept.size else (0.0, 0.0)
    edges = histogram_edges(np.array([lo]), np.array([hi]), bins)[0]
    counts, _ = np.histogram(kept, bins=edges)
    nan = int(np.isnan(values).sum())
    return Histogram(edges, counts.astype(np.int64), nan_count=nan,
                     inf_count=int(values.size - kept.size - nan))


def observe_action(hook: Any) -> Observe | None:
    """The Observe behind an attached hook (also inside ``once:observe``), else None."""
    impl = hook.impl
    if isinstance(impl, Once):
        impl = impl.inner
    return impl if isinstance(impl, Observe) else None


class ObserveReporter:
    """Session observer: ``result.observed`` = {module: ObservedGrads} for the
    observe hooks that ran in this step (absent when none did)."""

    def __init__(self, registry: Any, bins: int = 64) -> None:
        self.registry = registry
        self.bins = bins
        self._calls: dict[str, int] = {}

    def after_backward(self, session: Any, step: int) -> None:
        """Nothing to do before the optimizer step."""

    def after_step(self, session: Any, result: Any) -> None:
        observed = {}
        for path, hook in self.registry.attached().items():
            action = observe_action(hook)
            if action is None or not hook.calls or self._calls.get(path) == hook.calls:
                continue
            self._calls[path] = hook.calls
            stats = action.stats()
            observed[path] = ObservedGrads(
                path, result.step, hook.calls, stats["grad_input"], stats["grad_output"],
                {key: tensor_histogram(g, self.bins) for key, g in action.last_grads().items()})
        if observed:
            result.observed = observed
