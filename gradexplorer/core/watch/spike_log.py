"""``watch``'s batch identity and what it keeps of a spike event besides the stack's reporter.

Detection is the stack's ``SpikeObserver`` (core/diagnose/spike_observer.py), the reporter the
app and ``gradexplorer run`` use: the Recorder hands it each written step as a StepResult
whose ``batch`` is what ``BatchNotes`` holds for the step (the ids ``rec.note_batch`` gave, as
the run's ``batches`` table stores them). ``SpikeLog`` is the reporter's sink, the part only a
watched run has: on a flagged step the per-sample losses the user gave are brought over (the
largest are kept with the event), the event is written (table ``spike_events``) and the step
is snapshotted (at most ``keep_snapshots`` event snapshots, else MAX_EVENT_SNAPSHOTS).
"""

from __future__ import annotations

import json
import math
from typing import Any

import torch

from gradexplorer.core.diagnose.spike_band import SpikeSettings
from gradexplorer.core.diagnose.spike_observer import SpikeObserver
from gradexplorer.core.diagnose.spikes import SpikeEvent
from gradexplorer.core.messages.errors import UserError

MAX_EVENT_SNAPSHOTS = 8  # event snapshots a run keeps when keep_snapshots is not given
TOP_SAMPLES = 8  # samples with the largest loss kept with an event


def batch_json(ids: Any) -> str:
    """``ids`` as JSON text (sample indices, file names, any JSON-able value); a clear error
    otherwise. A tensor or numpy array is turned into its list."""
    if isinstance(ids, torch.Tensor):
        ids = ids.detach().cpu().tolist()
    elif hasattr(ids, "tolist") and callable(ids.tolist):
        ids = ids.tolist()
    try:
        return json.dumps(ids, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise UserError(f"note_batch: the batch ids must be JSON-able (numbers, strings, lists, "
                        f"dicts), got {type(ids).__name__}: {exc}") from None


def top_samples(per_sample: Any, ids: Any, count: int = TOP_SAMPLES) -> list[dict[str, Any]]:
    """The ``count`` samples with the largest loss (NaN/Inf first): index, loss, and the id the
    user noted for that position when the ids are a list of the batch's length."""
    if isinstance(per_sample, torch.Tensor):
        values = per_sample.detach().reshape(-1).to("cpu", torch.float64).tolist()
    else:
        values = [float(v) for v in per_sample]
    def rank(i: int) -> float:
        v = values[i]
        return math.inf if not math.isfinite(v) else v
    order = sorted(range(len(values)), key=rank, reverse=True)[:count]
    named = isinstance(ids, list) and len(ids) == len(values)
    out = []
    for i in order:
        v = values[i]
        entry = {"index": i, "loss": v if math.isfinite(v) else str(v)}
        if named:
            entry["id"] = ids[i]
        out.append(entry)
    return out


class BatchNotes:
    """The batch behind the step under way, as ``rec.note_batch`` gave it: its JSON text (the
    run's ``batches`` table) and the ids read back from it (``StepResult.batch``, an event's
    ``batch``: what ``Run.batch_ids`` returns for the step)."""

    def __init__(self) -> None:
        self._noted: tuple[int, str, Any] | None = None  # (step, ids as JSON, ids)

    def note(self, step: int, ids: Any) -> None:
        text = batch_json(ids)
        self._noted = (step, text, json.loads(text))

    def text_of(self, step: int) -> str | None:
        """The ids noted for ``step`` as JSON text, or None."""
        return self._noted[1] if self._noted and self._noted[0] == step else None

    def ids_of(self, step: int) -> Any:
        """The ids noted for ``step``, or None."""
        return self._noted[2] if self._noted and self._noted[0] == step else None


class SpikeLog:
    """The sink of ``watch``'s SpikeObserver: per-sample losses, event snapshots, the run's
    ``spike_events`` table. ``snapshot(record)`` writes a step's snapshot (None: none, FSDP2);
    ``periodic(step)``: that step has a periodic snapshot already."""

    def __init__(self, writer, snapshot=None, keep_snapshots: int | None = None,
                 periodic=lambda step: False) -> None:
        self.writer = writer
        self._snapshot, self._periodic = snapshot, periodic
        self._snapshots_left = keep_snapshots or MAX_EVENT_SNAPSHOTS
        self._per_sample: tuple[int, Any] | None = None
        self.grad_samples_of = None  # (step, ids) -> the largest per-sample gradient norms, or None

    def note_per_sample(self, step: int, per_sample: Any) -> None:
        if isinstance(per_sample, torch.Tensor):
            per_sample = per_sample.detach()  # stays on the device until a step is flagged
        self._per_sample = (step, per_sample)

    def keep(self, event: SpikeEvent, result) -> None:
        """``result``'s step belongs to ``event``: on its first step the samples with the
        largest loss and a snapshot; the event (as grown so far) into the run."""
        step = result.step
        if event.step == step:
            if self._per_sample and self._per_sample[0] == step:
                event.samples = top_samples(self._per_sample[1], event.batch)
            if self.grad_samples_of is not None:  # watch(per_sample_norms=True)
                event.grad_samples = self.grad_samples_of(step, event.batch) or []
            if self._snapshot is not None and not self._periodic(step) and \
                    self._snapshots_left > 0:
                self._snapshots_left -= 1
                self._snapshot(result.gradients)
        self.writer.write_event(event.step, event.until, json.dumps(event.to_json()))


def spike_reporter(spikes, log: SpikeLog, report) -> SpikeObserver:
    """``watch(spikes=…)``'s reporter for the stack: True (default settings) or a
    SpikeSettings; ``log`` its sink; a failure told through ``report``."""
    if spikes is not True and not isinstance(spikes, SpikeSettings):
        raise UserError(f"watch: spikes must be True, False or a SpikeSettings, "
                        f"got {type(spikes).__name__}")
    return SpikeObserver(None if spikes is True else spikes, report, sink=log.keep)
