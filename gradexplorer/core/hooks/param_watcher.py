"""Cheap per-parameter gradient watching with post-accumulate-grad hooks (no module hooks)."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn


class ParameterGradientWatcher:
    """Records each watched parameter's gradient norm as soon as it is accumulated.

    One ``register_post_accumulate_grad_hook`` per parameter: no full backward hook, no extra
    autograd nodes and no device sync until ``norms()`` is read. As a session observer it puts
    ``{name: norm or None}`` into ``result.extras["param_grad_norms"]``.
    """

    def __init__(self, model: nn.Module, names: Iterable[str] | None = None) -> None:
        params = dict(model.named_parameters())
        wanted = list(params) if names is None else list(names)
        missing = [n for n in wanted if n not in params]
        if missing:
            raise KeyError(f"no parameter(s) named {', '.join(missing)}")
        self.params = {n: params[n] for n in wanted if params[n].requires_grad}
        self._pending: dict[str, torch.Tensor] = {}
        self._handles: list = []

    def attach(self) -> ParameterGradientWatcher:
        """Register the hooks (idempotent)."""
        if not self._handles:
            self._handles = [
                p.register_post_accumulate_grad_hook(self._recorder(name))
                for name, p in self.params.items()
            ]
        return self

    def detach(self) -> None:
        """Remove every hook this watcher registered."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def __enter__(self) -> ParameterGradientWatcher:
        return self.attach()

    def __exit__(self, *exc) -> None:
        self.detach()

    def _recorder(self, name: str):
        pending = self._pending

        def record(param: torch.Tensor) -> None:
            if param.grad is not None:  # None when the gradient path was blocked
                pending[name] = torch.linalg.vector_norm(param.grad.detach())

        return record

    def norms(self) -> dict[str, float | None]:
        """Gradient norm per watched parameter from the last backward (None: no gradient)."""
        names = [n for n in self.params if n in self._pending]
        values = torch.stack([self._pending[n].float() for n in names]).tolist() if names else []
        found = dict(zip(names, values, strict=True))
        return {n: found.get(n) for n in self.params}

    def after_step(self, session, result) -> None:
        """Session observer: ``result.extras["param_grad_norms"]``."""
        result.extras["param_grad_norms"] = self.norms()
        self._pending.clear()
