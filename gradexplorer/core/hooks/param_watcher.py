"""Cheap per-parameter gradient watching with post-accumulate-grad hooks (no module hooks)."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn


class ParameterGradientWatcher:
    """Knows each watched parameter's gradient as soon as it is accumulated.

    One ``register_post_accumulate_grad_hook`` per parameter, which only keeps a reference to
    the gradient: no full backward hook, no extra autograd node, no kernel during backward.
    ``norms()`` computes all norms in one fused call. As a session observer it puts
    ``{name: norm or None}`` into ``result.param_grad_norms``.
    """

    def __init__(self, model: nn.Module, names: Iterable[str] | None = None) -> None:
        params = dict(model.named_parameters())
        wanted = list(params) if names is None else list(names)
        missing = [n for n in wanted if n not in params]
        if missing:
            raise KeyError(f"no parameter(s) named {', '.join(missing)}")
        self.params = {n: params[n] for n in wanted if params[n].requires_grad}
        self.grads: dict[str, torch.Tensor] = {}
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
        """Remove every hook this watcher registered and forget the gradients."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self.grads.clear()

    def __enter__(self) -> ParameterGradientWatcher:
        return self.attach()

    def __exit__(self, *exc) -> None:
        self.detach()

    def _recorder(self, name: str):
        grads = self.grads

        def record(param: torch.Tensor) -> None:
            if param.grad is not None:  # None when the gradient path was blocked
                grads[name] = param.grad

        return record

    def norms(self) -> dict[str, float | None]:
        """Gradient norm per watched parameter from the last backward (None: no gradient)."""
        names = [n for n in self.params if n in self.grads]
        found: dict[str, float] = {}
        if names:
            norms = torch._foreach_norm([self.grads[n].detach() for n in names])
            found = dict(zip(names, torch.stack(norms).float().tolist(), strict=True))
        return {n: found.get(n) for n in self.params}

    def after_step(self, session, result) -> None:
        """Session observer: ``result.param_grad_norms``, then forget this step."""
        result.param_grad_norms = self.norms()
        self.grads.clear()
