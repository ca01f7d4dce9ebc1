"""Live A/B of a hook: two copies of a model trained in lockstep, one with the hook.

Both arms start from the same weights and optimizer settings, see the same batch (the hooked
arm takes the plain arm's, kept by reference: a ``make_batch`` reading a stream is drawn once
per step), and draw the same random numbers (the random state is rewound to where the plain
arm's forward began before the hooked arm's step), so the only difference between them is the
hook. Each step reports both losses and how far the arms have drifted apart: the L2 distance
between their parameters and the cosine between their whole gradients (a parameter without a
gradient in one arm counts as zeros there), in float64. A hook that changes nothing
(``scale:1.0``) keeps them bit-identical.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from gradexplorer.core.hooks.registry import HookRegistry, normalize_path
from gradexplorer.core.model.training_state import restore_rng, rng_snapshot
from gradexplorer.core.model.workload import Workload
from gradexplorer.core.session.engine import (
    RunControl,
    SessionConfig,
    StepResult,
    TrainingSession,
    run_steps,
)
from gradexplorer.core.stack.assembly import SessionStack


@dataclass(frozen=True)
class ABStep:
    """One lockstep step of both arms."""

    step: int
    plain: StepResult
    hooked: StepResult
    divergence: float  # ‖θ_plain − θ_hooked‖₂ after the step
    grad_cosine: float  # cosine between the two arms' gradients of this step
    identical: bool  # every parameter bit-identical and the same loss


class ABRun:
    """Two sessions of one workload, ``plain`` and ``hooked`` (``module=action`` attached)."""

    def __init__(self, make_workload: Callable[[], Workload], config: SessionConfig,
                 module: str, action: str, seed: int = 0) -> None:
        self.plain = TrainingSession(make_workload(), config)
        self.hooked = TrainingSession(make_workload(), SessionConfig(**vars(config)))
        self.hooked.model.load_state_dict(self.plain.model.state_dict())
        self.plain.batch(0)  # the first batch, drawn once: the hooked arm probes its hook on it
        self.hooked.keep_batch(*self.plain.kept_batch)
        self.hooks = HookRegistry(self.hooked.model, seed=seed)
        # each arm observed by a SessionStack, as every session is: the hooked arm's holds the
        # registry (its hooks in each result, hook errors recovered), the plain arm's nothing
        self.stacks = (SessionStack.on(self.plain, origin=False),
                       SessionStack.on(self.hooked, hooks=self.hooks, origin=False))
        self.hooks.attach(module, action)
        self.module, self.action = module, self.hooks.attached()[normalize_path(module)].action

    def step(self) -> ABStep:
        """One step of each arm with the same random numbers; their divergence."""
        start = rng_snapshot(self.plain.device)
        plain = self.plain.step()
        after_plain = rng_snapshot(self.plain.device)
        step, batch, forward_rng = self.plain.kept_batch  # the plain arm's own batch
        self.hooked.keep_batch(step, batch, forward_rng)  # not drawn again: a stream stays put
        self.hooked.keep_micro_batches(*self.plain.kept_micro_batches)  # its other micro-batches
        restore_rng(forward_rng if forward_rng is not None else start)
        hooked = self.hooked.step()
        restore_rng(after_plain)  # the plain arm's stream goes on as if it ran alone
        params = list(zip(self.plain.model.parameters(), self.hooked.model.parameters(), strict=True))
        identical = plain.loss == hooked.loss and all(torch.equal(a, b) for a, b in params)
        return ABStep(plain.step, plain, hooked, parameter_distance(params), gradient_cosine(params),
                      identical)

    def run(self, steps: int | None, control: RunControl | None = None,
            between: Callable[[], bool] | None = None) -> Iterator[ABStep]:
        """Yield ``steps`` lockstep results (forever if None), honouring pause/stop;
        ``between``: ``run_steps``'s callback before each step (True ends the run)."""
        return run_steps(self.step, steps, control, between)


def parameter_distance(pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> float:
    """‖a − b‖₂ over all parameters together, in float64."""
    total = torch.zeros((), dtype=torch.float64)
    for a, b in pairs:
        total += (a.detach().double() - b.detach().double()).square().sum().cpu()
    return math.sqrt(float(total))


def gradient_cosine(pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> float:
    """Cosine between the two arms' whole gradients (float64), a parameter without a gradient
    in one arm counting as zeros there (a blocked module lowers the cosine); NaN when one arm
    has no gradient at all."""
    dot = na = nb = 0.0
    for a, b in pairs:
        ga = None if a.grad is None else a.grad.detach().double().flatten()
        gb = None if b.grad is None else b.grad.detach().double().flatten()
        if ga is not None and gb is not None:
            dot += float(ga @ gb)
        na += 0.0 if ga is None else float(ga @ ga)
        nb += 0.0 if gb is None else float(gb @ gb)
    if na == 0.0 or nb == 0.0:
        return 1.0 if na == nb == 0.0 else math.nan
    return dot / math.sqrt(na * nb)
