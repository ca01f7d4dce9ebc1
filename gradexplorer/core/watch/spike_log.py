"""Spike detection for ``watch``: the batch behind each step, events kept in the run directory.

The Recorder hands every written step to ``SpikeLog.after_write``; the detector
(core/diagnose/spikes.py) reads the figures the monitor already brought to the host. Only on a
flagged step does anything more happen: the per-sample losses the user gave are brought over
(the largest are kept with the event), the event is written (table ``spike_events``) and the
step is snapshotted (at most ``keep_snapshots`` event snapshots, else MAX_EVENT_SNAPSHOTS).
"""

from __future__ import annotations

import json
import math
from typing import Any

import torch

from gradexplorer.core.diagnose.spike_band import SpikeSettings
from gradexplorer.core.diagnose.spikes import SpikeDetector, SpikeEvent
from gradexplorer.core.messages.errors import UserError, first_line

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


class SpikeLog:
    """The Recorder's spike detection: noted batches, per-sample losses, events and snapshots."""

    def __init__(self, settings: SpikeSettings | None, writer, snapshot=None,
                 keep_snapshots: int | None = None, report=print) -> None:
        if settings is not None and not isinstance(settings, SpikeSettings):
            raise UserError(f"watch: spikes must be True, False or a SpikeSettings, "
                            f"got {type(settings).__name__}")
        self.detector = SpikeDetector(settings)
        self._report = report
        self.failed = False
        self.writer = writer
        self._snapshot = snapshot  # snapshot(record) writes the step's snapshot, or None
        self._snapshots_left = keep_snapshots or MAX_EVENT_SNAPSHOTS
        self._batch: tuple[int, str] | None = None  # (step, ids as JSON)
        self._per_sample: tuple[int, Any] | None = None
        self.grad_samples_of = None  # (step, ids) -> the largest per-sample gradient norms, or None

    @property
    def events(self) -> list[SpikeEvent]:
        return self.detector.events

    def close(self) -> None:
        """Let the detector's kernel warm-up end (Recorder.close: no thread left working)."""
        self.detector.close()

    def note_batch(self, step: int, ids: Any) -> None:
        self._batch = (step, batch_json(ids))

    def note_per_sample(self, step: int, per_sample: Any) -> None:
        if isinstance(per_sample, torch.Tensor):
            per_sample = per_sample.detach()  # stays on the device until a step is flagged
        self._per_sample = (step, per_sample)

    def batch_of(self, step: int) -> str | None:
        """The ids noted for ``step`` (JSON text), or None."""
        return self._batch[1] if self._batch and self._batch[0] == step else None

    def after_write(self, record, loss: float | None, snapshotted: bool = False,
                    global_norm: float | None = None) -> SpikeEvent | None:
        """Score the written step; on a flagged one keep the event (and snapshot its first step).
        ``global_norm``: the global norm to follow (the ledger's ``headline_norm``: as
        accumulated, before clipping), else the record's (as applied). A failure here is
        reported once and ends spike detection; recording goes on."""
        if self.failed:
            return None
        try:
            return self._check(record, loss, snapshotted, global_norm)
        except Exception as exc:  # noqa: BLE001 - never break the loop being watched
            self.failed = True
            self._report(f"gradexplorer: spike detection stopped at step {record.step}: "
                         f"{first_line(exc)}; recording goes on")
            return None

    def _check(self, record, loss: float | None, snapshotted: bool,
               global_norm: float | None) -> SpikeEvent | None:
        event = self.detector.observe(record.step, loss, record, global_norm)
        if event is None:
            return None
        if event.step == record.step:  # the event begins here: its batch is this step's
            text = self.batch_of(record.step)
            event.batch = None if text is None else json.loads(text)
            if self._per_sample and self._per_sample[0] == record.step:
                event.samples = top_samples(self._per_sample[1], event.batch)
            if self.grad_samples_of is not None:  # watch(per_sample_norms=True)
                event.grad_samples = self.grad_samples_of(record.step, event.batch) or []
            if self._snapshot is not None and not snapshotted and self._snapshots_left > 0:
                self._snapshots_left -= 1
                self._snapshot(record)
        self.writer.write_event(event.step, event.until, json.dumps(event.to_json()))
        return event
