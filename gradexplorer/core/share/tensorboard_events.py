"""A run as TensorBoard event files: the exact histograms (the ``HistogramProto`` that
``add_histogram_raw`` writes, no resampling), per-parameter figures and the step's figures as
scalars; one event per step holding all of them, its bytes written directly
(``event_records.py``: the bytes TensorBoard's protos would give, framed as its record writer
frames them; a per-value ``SummaryWriter`` call costs ~150 µs, TensorBoard's own protos and
pure-Python CRC ~400 µs a histogram, this ~20 µs). The file is written in a staging folder and
renamed into place once complete (``staged_folder.py``): a reader sees the whole run or none of it.

Tags: ``grad/NAME`` histograms of each parameter's gradient; ``FIGURE/NAME`` scalars
(``norm/fc1.weight``, ``abs_max/…``, ``update_ratio/…``); ``run/FIGURE`` the step's own
figures (``run/loss``, ``run/global_norm``, ``run/seconds`` and whatever else the run records
per step). Wall times are the run's own. TensorBoard's bucket ``i`` ends at
``bucket_limit[i]`` and starts where bucket ``i − 1`` ends (the first at ``min``); so the
buckets are the monitor's bins exactly, plus one bucket below and one above them holding the
values outside a fixed range when there are any.
"""

from __future__ import annotations

import itertools
import os
import socket
import time
from pathlib import Path

import numpy as np

from gradexplorer.core.gc_pause import gc_paused
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.runs.columns import figure_blocks
from gradexplorer.core.runs.history import RunHistory
from gradexplorer.core.share import event_records as ER
from gradexplorer.core.share.output import optional_import
from gradexplorer.core.share.selection import ExportSelection
from gradexplorer.core.share.staged_folder import staged_folder
from gradexplorer.core.stats.records import Histogram

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
        with open(partial, "wb") as file, gc_paused():  # rows and pieces by the 100,000
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
    """The event records, one per step after the file-version event, into ``file``: the
    figures and histograms of a block of steps read as arrays (``figure_blocks``), each event's
    bytes written directly (``event_records.py``), whole arrays encoded at a time."""
    file.write(ER.record(ER.file_version_event(time.time())))
    steps, times, figures = history.step_figures()
    index = {s: i for i, s in enumerate(steps.tolist())}
    encoded: dict = {}
    layout = ER.ScalarLayout()
    chosen = list(selection.figures)
    run_tags = [f"run/{f}".encode() for f in figures]
    columns = list(figures.values())
    for block, rows in figure_blocks(history.run, [s for s in selection.steps if s in index],
                                     selection.params, selection.histograms, optimizer=False):
        whole, known = _whole(block, chosen)
        names = block.names
        named = "\0".join(names).encode() + b"\0\0"  # the layout's key: these names, these slots
        hists = {} if rows is None else _histograms(rows, block, encoded)
        pieces: list = []
        sizes = []
        for k, step in enumerate(block.steps.tolist()):
            i = index[step]
            present = [j for j, v in enumerate(columns) if v[i] is not None]
            values = [ER.scalar_values([run_tags[j] for j in present],
                                       np.array([columns[j][i] for j in present]), encoded)]
            slots = known[k] & block.grad[k][:, None]  # (parameter, figure) with a value
            values.append(layout.encode(named + slots.tobytes(), lambda s=slots, n=names: [
                f"{chosen[f]}/{n[p]}".encode() for p, f in zip(*np.nonzero(s), strict=True)],
                whole[k][slots]))
            event = ER.event_pieces(float(times[i]), int(step), values + hists.get(step, []))
            pieces += event
            sizes.append(sum(map(len, event)))
            if progress is not None:
                progress(step)
        file.writelines(ER.frames(b"".join(pieces), sizes))  # a block's events framed at once


def _whole(block, chosen: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(values, known)`` (steps, parameters, figures) of the chosen figures as exports state
    them (``whole_figure``: norm and max |g| NaN/inf where the gradient held NaN/Inf)."""
    nan = block.known["nan_count"] & (np.nan_to_num(block.values["nan_count"]) > 0)
    inf = block.known["inf_count"] & (np.nan_to_num(block.values["inf_count"]) > 0) & ~nan
    values, known = [], []
    for f in chosen:
        v, kn = block.values[f], block.known[f]
        if f in ("norm", "abs_max"):
            v = np.where(nan, np.nan, np.where(inf, np.inf, v))
            kn = kn | nan | inf
        values.append(v)
        known.append(kn)
    return np.stack(values, axis=2), np.stack(known, axis=2)


def _histograms(rows, block, cache: dict) -> dict[int, list[bytes]]:
    """Each step's encoded histograms (``tensorboard_buckets``' buckets; a parameter without a
    gradient at the step, or a histogram that counts nothing, left out), those of one bin
    count and nothing outside its range encoded at once."""
    at_step = {s: k for k, s in enumerate(block.steps.tolist())}
    at_name = {n: p for p, n in enumerate(block.names)}
    ks = np.fromiter(map(at_step.__getitem__, rows.steps), np.int64, len(rows.steps))
    ps = np.fromiter(map(at_name.get, rows.names, itertools.repeat(-1)), np.int64, len(rows.names))
    tags = {n: f"grad/{n}".encode() for n in at_name}
    keep = (ps >= 0) & block.grad[ks, ps.clip(0)] if len(ks) else np.zeros(0, bool)
    known_mean, known_norm = block.known["mean"][ks, ps], block.known["norm"][ks, ps]
    mean, norm = block.values["mean"][ks, ps], block.values["norm"][ks, ps]
    out: dict[int, list[bytes]] = {}
    plain = (rows.extras[:, 2] == 0) & (rows.extras[:, 3] == 0)
    stacked = isinstance(rows.counts, np.ndarray)  # one bin count, already (n, bins) arrays
    sizes = np.full(len(ks), rows.counts.shape[1], np.int64) if stacked else \
        np.array([c.size for c in rows.counts], np.int64)
    for bins in np.unique(sizes[keep & plain]).tolist():
        pick = np.flatnonzero(keep & plain & (sizes == bins))
        if stacked:  # every row (as mostly): the arrays as they are, no copy picked out
            every = len(pick) == len(ks)
            edges = rows.edges if every else rows.edges[pick]
            counts = (rows.counts if every else rows.counts[pick]).astype(np.float64)
        else:
            edges = np.stack([rows.edges[i] for i in pick.tolist()])
            counts = np.stack([rows.counts[i] for i in pick.tolist()]).astype(np.float64)
        num = counts.sum(axis=1)
        m, nm = mean[pick], norm[pick]
        total = np.where(known_mean[pick] & np.isfinite(m), m * num, 0.0)
        squares = np.where(known_norm[pick] & np.isfinite(nm), nm**2, 0.0)
        header = np.stack([edges[:, 0], edges[:, -1], num, total, squares], axis=1)
        full = np.flatnonzero(num > 0)
        chosen = pick[full]
        if len(full) < len(pick):  # histograms that count nothing left out
            header, edges, counts = header[full], edges[full], counts[full]
        per = _same_each_step(ks[chosen], ps[chosen])
        if per:  # each step the same parameters' (as mostly): a row of bytes a step
            table = ER.histogram_value_steps([tags[rows.names[i]] for i in chosen[:per].tolist()],
                                             header, edges[:, 1:], counts, cache)
            view, width = memoryview(table.reshape(-1)), table.shape[1]
            for k, i in enumerate(chosen[::per].tolist()):
                out.setdefault(rows.steps[i], []).append((view[k * width:(k + 1) * width],))
            continue
        encoded = ER.histogram_values([tags[rows.names[i]] for i in chosen.tolist()],
                                      header, edges[:, 1:], counts, cache)
        for i, value in zip(chosen.tolist(), encoded, strict=True):
            out.setdefault(rows.steps[i], []).append(value)
    for i in np.flatnonzero(keep & ~plain).tolist():  # values outside a fixed range: rare
        h = Histogram(rows.edges[i], rows.counts[i], *rows.extras[i].tolist())
        k, p = ks[i], ps[i]
        stats = {f: block.values[f][k, p] if block.known[f][k, p] else None
                 for f in ("min", "max", "mean", "norm")}
        b = tensorboard_buckets(h, stats)
        if b["num"] > 0:
            out.setdefault(rows.steps[i], []).append(ER.histogram_value(
                f"grad/{rows.names[i]}".encode(), b["min"], b["max"], b["num"], b["sum"],
                b["sum_squares"], b["bucket_limits"], b["bucket_counts"]))
    return out


def _same_each_step(ks: np.ndarray, ps: np.ndarray) -> int:
    """How many rows each step has when the rows (step ``ks``, parameter ``ps``) are steps one
    after another, each a different step holding the same parameters in the same order; 0
    when they are not."""
    if not len(ks):
        return 0
    per = int(np.argmax(ks != ks[0])) or len(ks)  # the first step's rows
    if len(ks) % per:
        return 0
    steps, params = ks.reshape(-1, per), ps.reshape(-1, per)
    if not ((steps == steps[:, :1]).all() and (params == params[0]).all()
            and len(np.unique(steps[:, 0])) == len(steps)):
        return 0
    return per
