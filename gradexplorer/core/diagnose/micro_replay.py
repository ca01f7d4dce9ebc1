"""The micro-batches a replay of a step runs again: all ``k`` of a step that accumulated them,
in order, each from the random state its forward began with and with its loss ÷ k, as the step
ran them.

A session's step of ``k`` micro-batches (``SessionConfig.accumulate``) runs ``k`` forwards and
backwards into one ``.grad``. A replay of it (a gradient trace, the NaN-origin finder) runs all
``k`` again the same way: micro-batch ``j``'s batch and random state as the step kept them
(``StepBatches``; for a step not yet run, drawn now, each just before its forward, and kept for
the step), the buffers as the forwards before it left them, each loss divided by ``k`` before
its backward. So a parameter's replayed gradient, summed over the ``k`` backwards in their
order, is the step's own accumulated ``.grad``, bit for bit (``Accumulated``). A graph is one
forward's by nature: one micro-batch is traced op by op (``micro_batch``, 0-based; the
NaN-origin finder takes the first whose loss or gradients went non-finite).
"""

from __future__ import annotations

from typing import Any

import torch

from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.model.training_state import restore_rng
from gradexplorer.core.session.step_batches import StepDraws


class MicroBatches:
    """The micro-batches of ``step`` as a replay takes them: ``draws`` (a past step's, as the
    NaN-origin finder kept them) where given for that step, else the session's step under way
    (``config.accumulate`` of them), else one, ``make_batch(step)`` drawn afresh."""

    def __init__(self, session, step: int, draws: StepDraws | None = None) -> None:
        self.session, self.step = session, step
        self.draws = draws if draws is not None and draws.step == step else None
        if self.draws is not None:
            self.count = len(self.draws.parts)
        elif step == session.step_count:
            self.count = max(int(getattr(session.config, "accumulate", 1)), 1)
        else:
            self.count = 1

    def choose(self, micro_batch: int | None) -> int:
        """``micro_batch`` checked against the step's count (None: the first)."""
        if micro_batch is None:
            return 0
        if not 0 <= micro_batch < self.count:
            raise UserError(f"micro-batch {micro_batch + 1} asked for, but step "
                            f"{self.step + 1} has {self.count}")
        return micro_batch

    def first(self) -> tuple[Any, Any] | None:
        """Micro-batch 0 where it is known without a draw inside the replay (``draws``), or
        None (the replay asks the session: ``step_replay``)."""
        return self.draws.parts[0][0] if self.draws is not None else None

    def enter(self, j: int) -> tuple[Any, Any]:
        """Micro-batch ``j`` (≥ 1), its random state restored where it was kept (one drawn now
        begins from the state right after its draw, as in the step)."""
        if self.draws is not None:
            batch, rng = self.draws.parts[j]
        else:
            batch, rng = self.session.micro_batch(j)
        if rng is not None:
            restore_rng(rng)
        return batch

    def scaled(self, loss: torch.Tensor) -> torch.Tensor:
        """The loss the step's backward ran: ÷ k with ``k`` ≥ 2 (the step's own division)."""
        return loss if self.count == 1 else loss / self.count


class Accumulated:
    """The model's parameters' gradients summed over a replay's backwards in their order, as
    ``.grad`` accumulates them (the first taken as it is, each next one added)."""

    def __init__(self, model: torch.nn.Module) -> None:
        seen: set[int] = set()
        self.params = [p for p in model.parameters()
                       if p.requires_grad and id(p) not in seen and not seen.add(id(p))]
        self._ids = {id(p) for p in self.params}
        self._sums: dict[int, torch.Tensor] = {}

    def backward(self, loss: torch.Tensor) -> None:
        """One untraced backward of ``loss`` (``torch.autograd.grad``: ``.grad`` untouched)."""
        grads = torch.autograd.grad(loss, self.params, allow_unused=True)
        self.add(self.params, grads)

    def add(self, params, grads) -> None:
        """Add one backward's gradients of ``params`` (None: not reached)."""
        for p, g in zip(params, grads, strict=True):
            if g is not None and id(p) in self._ids:
                total = self._sums.get(id(p))
                self._sums[id(p)] = g if total is None else total + g

    def of(self, variable: torch.Tensor, own: torch.Tensor | None) -> torch.Tensor | None:
        """``variable``'s gradient over the step: the sum for a parameter, else ``own``."""
        return self._sums.get(id(variable), own) if id(variable) in self._ids else own

    def nonfinite(self) -> bool:
        """Whether any summed gradient holds NaN/Inf."""
        return any(not bool(torch.isfinite(g.coalesce().values() if g.is_sparse else g).all())
                   for g in self._sums.values())
