"""``watch``'s noise scale: a step of several backwards (gradient accumulation) gives the gradient
noise scale ``B_simple`` and each parameter's gradient SNR (``core/stats/noise_scale.py``), from
each backward's own gradient (``core/steps/micro_batches.py``), written to the run's
``noise_steps`` and ``noise_params`` tables (docs/noise.md).

The scale of the gradients: backward ``i`` adds ``d_i = g_i / c`` to ``.grad`` (times a
GradScaler's scale ``s``), ``g_i`` the gradient of micro-batch ``i``'s mean loss and ``c`` what
the loop divides each micro-batch's loss by (``loss_divisor``: ``"k"``, the number of
backwards, by default, as most accumulating loops do; ``1`` for a loop that sums the losses).
So ``|g_i|² = c²|d_i|²/s²`` and ``|G_big|² = c²|A_k|²/(k²s²)``. ``B_simple`` and the SNR are
ratios of such squares: ``c`` and ``s`` cancel, a wrong ``loss_divisor`` changes only the
absolute ``|G|²`` and ``tr(Σ)``. The micro-batch size ``b`` is the first dimension of the
model's output in each forward that needs a gradient (``micro_batch_size`` overrides it).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial

import numpy as np
import torch

from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.stats.noise_scale import NoiseFigures, NoiseSmoother, Smoothed, estimate
from gradexplorer.core.steps.micro_batches import MicroBatchNorms
from gradexplorer.core.watch.noise_params import PARAM_COLUMNS, ParamFold


@dataclass(frozen=True)
class NoiseSettings:
    """``watch(noise_scale=NoiseSettings(...))``: ``micro_batch_size`` (samples a backward; None:
    the first dimension of the model's output), ``loss_divisor`` (``"k"`` or a number: what each
    micro-batch's loss is divided by), ``beta`` (the EMA's decay per recorded step)."""

    micro_batch_size: int | None = None
    loss_divisor: str | float = "k"
    beta: float = 0.95

    def __post_init__(self) -> None:
        b, c = self.micro_batch_size, self.loss_divisor
        if b is not None and (isinstance(b, bool) or not isinstance(b, int) or b < 1):
            raise UserError(f"noise_scale: micro_batch_size must be a whole number ≥ 1, got {b!r}")
        if c != "k" and (isinstance(c, bool) or not isinstance(c, (int, float)) or not c > 0):
            raise UserError(f"noise_scale: loss_divisor must be 'k' or a number > 0, got {c!r}")
        if isinstance(self.beta, bool) or not isinstance(self.beta, (int, float)) or \
                not 0 <= self.beta < 1:
            raise UserError(f"noise_scale: beta must be in [0, 1), got {self.beta!r}")


@dataclass(frozen=True)
class NoiseStep:
    """One step's figures: ``whole`` the model's, ``per`` arrays over ``names`` (small, big,
    g_sq, trace, snr, snr_ema; NaN where not defined), ``smoothed`` the model's EMAs."""

    step: int
    parts: int
    batch: int
    divisor: float
    whole: NoiseFigures
    smoothed: Smoothed
    names: list[str]
    per: Mapping[str, np.ndarray]  # (made when first read: noise_params.py)
    ranks: int = 1  # DDP ranks the parts came from (noise_ranks.py)

    @property
    def source(self) -> str:
        """Where the small batches came from: "micro-batches", "ranks" or "both"."""
        return "micro-batches" if self.ranks == 1 else "ranks" if self.parts == self.ranks \
            else "both"

    def step_row(self) -> tuple:
        w, s = self.whole, self.smoothed
        return (self.step, self.parts, self.batch, self.divisor, w.small, w.big, w.g_sq, w.trace,
                w.b_simple, s.g_sq, s.trace, s.b_simple, s.low, s.high)

    def param_rows(self) -> list[tuple]:
        columns = [[None if v != v else float(v) for v in self.per[c]] for c in PARAM_COLUMNS]
        return [(self.step, name, *values) for name, *values in zip(self.names, *columns,
                                                                    strict=True)]



def _first_batch_dim(output) -> int | None:
    """The first dimension of the first tensor (in order) of ``output`` that needs a gradient."""
    todo = [output]
    while todo:
        item = todo.pop(0)
        if isinstance(item, torch.Tensor):
            if item.requires_grad and item.dim() >= 1:
                return int(item.shape[0])
        elif isinstance(item, dict):
            todo.extend(item.values())
        elif isinstance(item, (list, tuple)):
            todo.extend(item)
    return None


def _on_output(append, _module, _args, output) -> None:
    """The model's forward hook (a function, not a method: a deepcopy of the model, an EMA
    copy, takes it as it is, not the watch): every forward that needs a gradient, its batch
    size (the step's are the last ones)."""
    if torch.is_grad_enabled():
        append(output.shape[0] if type(output) is torch.Tensor and output.dim()
               else _first_batch_dim(output))


class NoiseWatch:
    """The capture on the probe's backwards, the batch size from the model's forwards, the
    figures at each recorded step (``take``) and the EMAs across them."""

    def __init__(self, probe, model: torch.nn.Module, names: list[str],
                 settings: NoiseSettings, report, writer=None, cadence=None) -> None:
        self.settings, self.names, self._report, self._writer = settings, names, report, writer
        self.capture = MicroBatchNorms(probe._params)
        self.smoother = NoiseSmoother(settings.beta)
        self._params = ParamFold(settings.beta, len(names))  # per parameter: noise_params.py
        self._sizes: deque[int | None] = deque(maxlen=4096)  # (steps not recorded: bounded)
        self.skipped: str | None = None  # why the last step of several backwards had no figures
        self.latest: NoiseStep | None = None  # the last recorded step's figures
        self._said: set[str] = set()  # the reasons already said
        probe.on_backward = self.capture.backward
        self._probe, self._model, self.cadence = probe, model, cadence  # noise_cadence.py
        self._handle = None
        self._arm(cadence is None or cadence.now)  # a resumed run's cadence: maybe not yet

    def _arm(self, on: bool) -> None:
        """The capture's hooks (and the forward hook for ``b``) on, or off for steps it does
        not record (``noise_every``)."""
        self.capture.pause(not on)
        self._probe.on_backward = self.capture.backward if on else None
        if not on and self._handle is not None:
            self._handle = self._handle.remove()
        elif on and self._handle is None and self.settings.micro_batch_size is None:
            self._handle = self._model.register_forward_hook(partial(_on_output, self._sizes.append))

    def take(self, step: int, scale: float | None, accumulated: dict[str, float]) -> NoiseStep | None:
        """At a recorded step (``accumulated``: its norms as accumulated, by name): its figures
        (kept as ``latest``, given to the run's writer, which makes its per-parameter rows),
        None where it had one backward (or could not)."""
        cadence = self.cadence
        if cadence is not None and not cadence.now:  # noise_every: a step it does not record
            found = None
        else:
            self.latest = found = self._figures(step, scale, accumulated)
            if found is not None and self._writer is not None:
                self._writer.write_noise(found)
        if cadence is not None:  # on or off for the next recorded step
            self._arm(cadence.close(step, found is not None))
        return found

    def _figures(self, step: int, scale: float | None, accumulated) -> NoiseStep | None:
        sums, sizes = self.capture.take(), self._taken_sizes()
        if sums.parts < 2:
            return None
        sizes = sizes[-sums.parts:]  # the forwards of this step's backwards
        b = self.settings.micro_batch_size or (sizes[0] if sizes and None not in sizes and
                                               len(set(sizes)) == 1 else None)
        why = sums.why or (None if b else f"micro-batch sizes {sorted(set(map(str, sizes)))} "
                           "are not one size (give NoiseSettings(micro_batch_size=...))") or (
            None if accumulated else "its gradient as accumulated is not known")
        if why is not None:
            self._say(step, why)
            return None
        return self._estimates(step, sums.diff_sq, sums.parts, b, scale, accumulated)

    def _estimates(self, step: int, diff_sq, k: int, b: int, scale, accumulated,
                   ranks: int = 1) -> NoiseStep | None:
        """The step's figures from ``diff_sq`` (Σ|d_i|² per parameter over its ``k`` backwards,
        on ``ranks`` ranks: ``k / ranks`` each, DDP's mean of the ranks in ``.grad``)."""
        m = k // ranks  # backwards per rank: |G_big|² = c²|A|²/(m²s²), A the (ranks' mean) .grad
        c = float(m if self.settings.loss_divisor == "k" else self.settings.loss_divisor)
        s2 = float(scale) ** 2 if scale else 1.0
        every = len(accumulated) == len(self.names) and list(accumulated) == self.names
        present = slice(None) if every else np.array(
            [i for i, n in enumerate(self.names) if accumulated.get(n) is not None], np.int64)
        last = np.fromiter(accumulated.values(), np.float64, len(accumulated)) if every else \
            np.array([accumulated[self.names[i]] for i in present], np.float64)
        small = diff_sq[present] * (c * c / (k * s2))
        big = last * last * (c * c / (m * m * s2))
        whole = estimate(math.fsum(small), math.fsum(big), k, b)
        if not (math.isfinite(whole.g_sq) and math.isfinite(whole.trace)):  # kept out of the EMAs
            self._say(step, "its gradient holds NaN or Inf")
            return None
        per = self._params.add(small, big, k, b, present)  # made when first read
        return NoiseStep(step, k, b, c, whole, self.smoother.add(whole.trace, whole.g_sq),
                         self.names if every else [self.names[i] for i in present], per, ranks)

    def _taken_sizes(self) -> list:
        """The batch sizes of the forwards since the last step (their list emptied)."""
        sizes = list(self._sizes)
        self._sizes.clear()
        return sizes

    def _say(self, step: int, why: str) -> None:
        if why not in self._said:
            self._said.add(why)
            self._report(f"gradexplorer: no noise scale at step {step}: {why} (said once)")
        self.skipped = why

    def remove(self) -> None:
        if self._handle is not None:
            self._handle.remove()
        self.capture.remove()
        self._probe.on_backward = None
