"""Which batches a session's step uses: drawn once, kept, replayed (a mixin of
``TrainingSession``, ``engine.py``).

A step of ``k`` micro-batches (``SessionConfig.accumulate``) draws ``make_batch`` ``k`` times,
in order, each draw just before its micro-batch's forward, as a hand-written accumulation loop
does: with ``k`` fixed, step ``s`` (0-based) draws ``make_batch(s·k)`` … ``make_batch(s·k+k−1)``
(``micro_drawn``: the micro-batches drawn by the steps before, whatever ``k`` each had). Every
micro-batch of the step under way is kept, by reference, with the random state right after its
draw: a replay of the step (a redone attempt, the other arm of an A/B, a gradient trace) uses
the same ``k`` batches and never draws again, so a ``make_batch`` reading a stream neither skips
data nor gives a replay other batches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gradexplorer.core.model.training_state import rng_snapshot
from gradexplorer.core.model.workload import ModelInputs, as_model_inputs, move_to, split_batch

Kept = tuple[tuple[ModelInputs, Any], dict | None]  # (batch, random state after its draw)


@dataclass(frozen=True)
class StepDraws:
    """A step's micro-batches as it drew them, ``((batch, random state after its draw), …)``
    (the first's state None: a replay is given it apart), kept by reference to replay that step
    after the session moved on (``StepBatches.step_draws``; the NaN-origin finder)."""

    step: int
    parts: tuple[Kept, ...]


class StepBatches:
    """The batch side of a TrainingSession (``workload``, ``device``, ``step_count``,
    ``config`` are the session's)."""

    micro_drawn = 0  # micro-batches drawn by the steps before the step under way
    _kept: tuple[int, tuple[ModelInputs, Any], dict | None] | None = None  # micro-batch 0
    _more: tuple[int, list[Kept]] = (-1, [])  # the step under way's micro-batches 1, 2, …

    def _draw(self, index: int) -> tuple[ModelInputs, Any]:
        inputs, target = split_batch(self.workload.make_batch(index))
        return as_model_inputs(move_to(inputs, self.device)), move_to(target, self.device)

    def batch(self, step: int) -> tuple[ModelInputs, Any]:
        """The batch for ``step`` on the session's device: (positional tuple or kwargs dict,
        target); for the step under way (``step_count``) its first micro-batch.

        The step under way draws it from ``make_batch`` once and keeps it, by reference, with
        the random state right after the draw (``forward_rng``): every replay of that step — a
        gradient trace, the NaN-origin replay, a redone attempt, the other arm of an A/B — sees
        the batch the step used and never draws again. Other steps are drawn afresh
        (``make_batch(step)``)."""
        if self._kept is not None and self._kept[0] == step:
            return self._kept[1]
        under_way = step == self.step_count
        batch = self._draw(self.micro_drawn if under_way else step)
        if under_way:
            self.keep_batch(step, batch, rng_snapshot(self.device))
        return batch

    def micro_batch(self, j: int) -> tuple[tuple[ModelInputs, Any], dict | None]:
        """Micro-batch ``j`` (≥ 1) of the step under way and, where it was kept (a replay), the
        random state its forward starts from; drawn now (``make_batch(micro_drawn + j)``) and
        kept where not yet, with None."""
        step, kept = self._more
        if step == self.step_count and len(kept) >= j:
            return kept[j - 1]
        if step != self.step_count:
            kept = []
            self._more = (self.step_count, kept)
        batch = self._draw(self.micro_drawn + j)
        kept.append((batch, rng_snapshot(self.device)))
        return batch, None

    def keep_batch(self, step: int, batch: tuple[ModelInputs, Any], rng: dict | None) -> None:
        """Use ``batch`` for ``step`` (and ``rng``, the random state its forward starts from)
        instead of drawing one: the A/B's hooked arm takes the plain arm's."""
        self._kept = (step, batch, rng)

    @property
    def kept_batch(self) -> tuple[int, tuple[ModelInputs, Any], dict | None] | None:
        """``(step, batch, random state after the draw)`` of the last batch drawn for a step
        under way (its first micro-batch), or None."""
        return self._kept

    @property
    def kept_micro_batches(self) -> tuple[int, list[Kept]]:
        """``(step, [(batch, random state after its draw), …])``: micro-batches 1, 2, … kept
        for ``step`` (the last step drawn for)."""
        return self._more[0], list(self._more[1])

    def keep_micro_batches(self, step: int, kept: list[Kept]) -> None:
        """Use ``kept`` as micro-batches 1, 2, … of ``step``: the A/B's hooked arm takes the
        plain arm's."""
        self._more = (step, list(kept))

    def step_draws(self, step: int) -> StepDraws | None:
        """The micro-batches ``step`` (the step under way, all drawn) took, or None."""
        if self._kept is None or self._kept[0] != step:
            return None
        more = self._more[1] if self._more[0] == step else []
        return StepDraws(step, ((self._kept[1], None), *more[:self.config.accumulate - 1]))

    def forward_rng(self, step: int) -> dict | None:
        """The random state ``step``'s forward started from (right after its batch was drawn),
        while that step's batch is kept; None otherwise."""
        return self._kept[2] if self._kept is not None and self._kept[0] == step else None

    def batch_ids(self, k: int) -> dict[str, Any]:
        """The step under way's batch identity, as spike forensics names it: ``{"make_batch":
        N}``, a list of the ``k`` indices with micro-batches."""
        first = self.micro_drawn
        return {"make_batch": first if k == 1 else list(range(first, first + k))}

