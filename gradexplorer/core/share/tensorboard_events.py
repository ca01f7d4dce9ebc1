"""A run as TensorBoard event files: the exact histograms (the ``HistogramProto`` that
``add_histogram_raw`` writes, no resampling), per-parameter figures and the step's figures as
scalars; one event per step holding all of them (written with TensorBoard's own protos and
record writer: a per-value ``SummaryWriter`` call costs ~150 µs, 25 s for 100 steps of
150 parameters). The file is written in a staging folder and renamed into place once complete
(``staged_folder.py``): a reader sees the whole run or none of it.

Tags: ``grad/NAME`` histograms of each parameter's gradient; ``FIGURE/NAME`` scalars
(``norm/fc1.weight``, ``abs_max/…``, ``update_ratio/…``); ``run/FIGURE`` the step's own
figures (``run/loss``, ``run/global_norm``, ``run/seconds`` and whatever else the run records
per step). Wall times are the run's own. TensorBoard's bucket ``i`` ends at
``bucket_limit[i]`` and starts where bucket ``i − 1`` ends (the first at ``min``); so the
buckets are the monitor's bins exactly, plus one bucket below and one above them holding the
values outside a fixed range when there are any.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import numpy as np

from gradexplorer.core.errors import UserError
from gradexplorer.core.recorder.run_history import RunHistory
from gradexplorer.core.share import event_records as ER
from gradexplorer.core.share.output import optional_import
from gradexplorer.core.share.selection import ExportSelection
from gradexplorer.core.share.staged_folder import staged_folder
from gradexplorer.core.stats.records import Histogram, whole_figures

EVENTS = "events.out.tfevents."


def tensorboard_buckets(h: Histogram, stats: dict) -> dict:
    """``add_histogram_raw``'s arguments for one histogram (the finite values it counts)."""
    limits, counts = list(h.edges[1:].tolist()), list(h.counts.tolist())
    low, high = float(h.edges[0]), float(h.edges[-1])
    lo_stat, hi_stat = stats.get("min"), stats.get("max")
    if h.below:
        low = float(lo_stat) if lo_stat is not None and lo_stat < h.edges[0] else low
        limits.insert(0, float(h.edges[0]))
        counts.insert(0, int(h.below))
    if h.above:
        high = float(hi_stat) if hi_stat is not None and hi_stat > h.edges[-1] else high
        limits.append(high)
        counts.append(int(h.above))
    num = int(sum(counts))
    mean, norm = stats.get("mean"), stats.get("norm")
    total = float(mean) * num if mean is not None and np.isfinite(mean) else 0.0
    squares = float(norm) ** 2 if norm is not None and np.isfinite(norm) else 0.0
    return {"min": low, "max": high, "num": num, "sum": total, "sum_squares": squares,
            "bucket_limits": limits, "bucket_counts": counts}


def export_tensorboard(history: RunHistory, selection: ExportSelection, directory: str | Path,
                       overwrite: bool = False, progress=None) -> Path:
    """Write the run's event file into ``directory/RUN_NAME`` (several runs exported into one
    folder show as several runs in TensorBoard); returns that folder."""
    optional_import("tensorboard", "--to tensorboard")  # what reads the files

    target = Path(directory) / history.run.path.resolve().name
    if target.is_file() or Path(directory).is_file():
        raise UserError(f"cannot write TensorBoard events to {str(target)!r}: a file is in the way")
    earlier = [p for p in target.iterdir() if p.name.startswith(EVENTS)] if target.is_dir() else []
    if earlier and not overwrite:
        raise UserError(f"{str(target)!r} already holds TensorBoard events; "
                        "--overwrite replaces them")
    with staged_folder(directory, target.name, "TensorBoard events") as staging:
        partial = staging / "events.partial"  # no reader takes it for events until renamed
        with open(partial, "wb") as file:
            _write_events(history, selection, file, progress)
            file.flush()
            os.fsync(file.fileno())
        target.mkdir(parents=True, exist_ok=True)
        for path in earlier:
            path.unlink(missing_ok=True)
        name = f"{EVENTS}{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}.0"
        os.replace(partial, target / name)
    return target


def _write_events(history: RunHistory, selection: ExportSelection, file, progress) -> None:
    """The event records, one per step after the file-version event, into ``file``: each
    event's bytes written directly (``event_records.py``), the steps read a block at a time."""
    file.write(ER.record(ER.file_version_event(time.time())))
    steps, times, figures = history.step_figures()
    index = {s: i for i, s in enumerate(steps.tolist())}
    run_tags = {f: f"run/{f}".encode() for f in figures}
    tags: dict[tuple[str, str], bytes] = {}
    encoded: dict[bytes, tuple[bytes, bytes]] = {}
    for step, stats, hists in history.step_blocks([s for s in selection.steps if s in index],
                                                  selection.params, selection.histograms):
        i = index[step]
        names = [run_tags[f] for f, v in figures.items() if v[i] is not None]
        numbers = [v[i] for v in figures.values() if v[i] is not None]
        histos = []
        for name, figs in stats.items():
            whole = whole_figures(figs)  # a NaN/Inf gradient's norm: nan/inf (histogram: finite)
            for field in selection.figures:
                value = whole.get(field)
                if value is not None:
                    tag = tags.get((field, name))
                    if tag is None:
                        tag = tags[(field, name)] = f"{field}/{name}".encode()
                    names.append(tag)
                    numbers.append(value)
            h = hists.get(name)
            if h is not None and h.counts.sum() + h.below + h.above > 0:
                b = tensorboard_buckets(h, figs)
                histos.append(ER.histogram_value(f"grad/{name}".encode(), b["min"], b["max"], b["num"],
                                                 b["sum"], b["sum_squares"], b["bucket_limits"],
                                                 b["bucket_counts"]))
        values = ER.scalar_values(names, np.array(numbers, np.float64), encoded)
        file.write(ER.record(ER.event(float(times[i]), int(step), [values, *histos])))
        if progress is not None:
            progress(step)
