"""Whole-run reads (``runs.columns``, ``figure_block``) give what the per-step reads give, on
real runs: clipped, with a NaN/Inf step, with a skipped step, with histograms on a cadence, and
written without a ledger; the TensorBoard events written directly read back equal."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
import torch
from torch import nn
from watched_loop import clipped_run

import gradexplorer as gx
from gradexplorer.core.runs.columns import decode_histograms, histogram_rows, step_blocks
from gradexplorer.core.runs.history import RunHistory
from gradexplorer.core.stats.records import whole_figure
from tests.share_helpers import write_run


def scaler_run(path):
    """A GradScaler run whose step 6 holds Inf gradients (skipped), histograms every 2nd step."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    with gx.watch(model, opt, path, scaler=scaler, histogram_every=2, bins=8):
        for step in range(1, 9):
            x = torch.randn(16, 4, generator=torch.Generator().manual_seed(step))
            if step == 6:
                x[0, 0] = float("inf")
            scaler.scale(model(x).square().mean()).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
    return path


def ledgerless_run(source, path):
    """``source``'s run with its ledger rows of steps 2 and 4 gone (a run from before the
    ledger reads as one whose steps have none)."""
    import shutil
    import sqlite3

    shutil.copytree(source, path)
    with sqlite3.connect(path / "run.sqlite") as db:
        db.execute("DELETE FROM ledger WHERE step IN (2, 4)")
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("bulk")
    clipped_run(base / "clipped", steps=5)
    made = {"clipped": base / "clipped", "scaler": scaler_run(base / "scaler"),
            "nan": write_run(base / "nan", steps=6, nan_at=3, bins=8)}
    made["ledgerless"] = ledgerless_run(made["nan"], base / "ledgerless")
    return made


def same(a, b) -> bool:
    """Equal, NaN equal to NaN, and of the same type (an int count stays an int)."""
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return a == b and type(a) is type(b)


def per_step_figures(run) -> dict[str, list]:
    """The step figures read one step at a time: the step table's columns, and every other
    number ``step_info`` holds (bools, text and lists left out); None where a step has none."""
    steps = run.steps
    out: dict[str, list] = {k: [None] * len(steps) for k in ("global_norm", "total_numel", "loss",
                                                               "seconds", "ranks")}
    for i, step in enumerate(steps):
        for key, value in run.step_info(step).items():
            if key == "time" or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            out.setdefault(key, [None] * len(steps))[i] = float(value)
    return out


@pytest.mark.parametrize("which", ["clipped", "scaler", "nan", "ledgerless"])
def test_step_figures_are_the_per_step_reads(runs, which):
    run = gx.open_run(runs[which])
    steps, times, figures = RunHistory(run).step_figures()
    assert steps.tolist() == run.steps
    assert times.tolist() == [r["time"] for r in run.step_rows()]
    assert same(figures, per_step_figures(run))
    table = RunHistory(run).step_table()
    assert table.skipped.tolist() == [run.step_ledger(s).skipped for s in run.steps]
    assert table.clipped.tolist() == [bool(run.step_ledger(s).clipped) for s in run.steps]


def test_the_runs_hold_what_the_cases_are_about(runs):
    clipped, scaler = gx.open_run(runs["clipped"]), gx.open_run(runs["scaler"])
    assert all(clipped.step_ledger(s).clipped for s in clipped.steps)
    assert [s for s in scaler.steps if scaler.step_ledger(s).skipped] == [6]
    assert RunHistory(scaler).histogram_steps() == [2, 4, 6, 8]
    nan = gx.open_run(runs["nan"])
    assert nan.figures(3)["0.weight"]["nan_count"] == 1 and nan.figures(3)["2.bias"]["inf_count"] == 1
    assert math.isnan(RunHistory(nan).step_figures()[2]["global_norm"][2])
    assert len(gx.open_run(runs["ledgerless"]).ledger()) == 6


@pytest.mark.parametrize("which", ["clipped", "scaler", "nan", "ledgerless"])
@pytest.mark.parametrize("chunk", [2, 256])
def test_step_blocks_are_figures_and_histograms_of_each_step(runs, which, chunk):
    run = gx.open_run(runs[which])
    seen = []
    for step, figures, hists in step_blocks(run, run.steps, chunk=chunk):
        seen.append(step)
        assert same(figures, run.figures(step))
        expected = run.histograms(step)
        assert sorted(hists) == sorted(expected)
        for name, h in hists.items():
            e = expected[name]
            assert np.array_equal(h.edges, e.edges) and np.array_equal(h.counts, e.counts)
            assert (h.nan_count, h.inf_count, h.below, h.above) == (
                e.nan_count, e.inf_count, e.below, e.above)
    assert seen == run.steps
    name = run.parameters[-1]
    some = run.steps[::2]
    for step, figures, _ in step_blocks(run, some, [name], histograms=False, chunk=chunk):
        assert list(figures) == [name] and same(figures[name], run.figures(step)[name])


def test_histograms_decode_as_the_stored_bytes_say(runs):
    """An independent decode: each row's blobs read with ``np.frombuffer`` one by one."""
    run = gx.open_run(runs["scaler"])
    stored = run._rows("SELECT step, name, edges, counts, nan_count, inf_count, below, above "
                       "FROM histograms ORDER BY step, name")
    edges, counts, extras = decode_histograms([r[2:] for r in stored], lambda i: "row", run.version)
    for (step, name, e, c, *more), de, dc, dx in zip(stored, edges, counts, extras.tolist(), strict=True):
        # format 3: counts after a byte giving their width; edges whole, or (lo, hi) of equal bins
        assert np.array_equal(dc, np.frombuffer(c[1:], f"<u{c[0]}")) and len(de) == len(dc) + 1
        stored_edges = np.frombuffer(e, "<f8")
        assert (de[0], de[-1]) == (stored_edges[0], stored_edges[-1])
        assert len(stored_edges) == 2 or np.array_equal(de, stored_edges)
        assert np.array_equal(de, run.histogram(step, name)[0])  # as the one-row read decodes it
        assert dx == more
    rows = histogram_rows(run, [1, 2, 3, 4], None)
    assert sorted(set(rows.steps)) == [2, 4]  # steps 1 and 3 hold none


def test_histogram_matrix_stacks_the_steps_histograms(runs):
    run = gx.open_run(runs["scaler"])
    name = run.parameters[0]
    matrix = RunHistory(run).histogram_matrix(name, run.steps)
    assert matrix.steps.tolist() == [2, 4, 6, 8]
    for row, step in enumerate(matrix.steps.tolist()):
        edges, counts = run.histogram(step, name)
        assert np.array_equal(matrix.edges[row], edges) and np.array_equal(matrix.counts[row], counts)
        h = run.histograms(step)[name]
        assert matrix.nonfinite[row] == h.nan_count + h.inf_count


@pytest.mark.parametrize("which", ["clipped", "scaler", "nan"])
def test_flagged_steps_and_summaries_are_the_per_step_ones(runs, which):
    run = gx.open_run(runs[which])
    history = RunHistory(run)
    flagged = history.flagged_steps()
    for step in run.steps:
        info, figures = run.step_info(step), run.figures(step)
        nonfinite = any(not math.isfinite(info[k]) for k in ("loss", "global_norm")
                        if info[k] is not None) or any(f["nan_count"] or f["inf_count"]
                                                       for f in figures.values())
        assert ("NaN/Inf" in flagged.get(step, [])) == nonfinite
        assert ("skipped" in flagged.get(step, [])) == run.step_ledger(step).skipped
    summaries = history.parameter_summaries()
    assert history._plain_summaries() is not None  # every parameter had a gradient each step
    checked = history._checked_summaries()
    assert [tuple(r) for r in history._plain_summaries()] == [tuple(r) for r in checked]
    for name, summary in summaries.items():
        norms = [run.figures(s)[name]["norm"] for s in run.steps]
        assert summary.max_norm == max(norms) and summary.steps == len(run.steps)


def test_tensorboard_events_read_back_equal(runs, tmp_path, run_cli):
    """TensorBoard's own reader takes the directly written events: every scalar is the run's
    figure as float32 (norm NaN/inf where the gradient held NaN/Inf), every histogram the run's
    bins and counts, at the run's steps and wall times."""
    pytest.importorskip("tensorboard")
    from tests.test_export import tensorboard_reader

    path = runs["nan"]
    code, _, err = run_cli("export", path, "--to", "tensorboard", tmp_path / "tb")
    assert code == 0, err
    acc = tensorboard_reader(tmp_path / "tb" / path.name)
    run = gx.open_run(path)
    wall = {r["step"]: r["time"] for r in run.step_rows()}
    for name in run.parameters:
        events = acc.Histograms(f"grad/{name}")
        assert [e.step for e in events] == run.steps
        for e in events:
            edges, counts = run.histogram(e.step, name)
            assert e.wall_time == wall[e.step]
            assert e.histogram_value.bucket_limit == edges[1:].tolist()
            assert e.histogram_value.bucket == counts.astype(float).tolist()
            assert e.histogram_value.min == edges[0] and e.histogram_value.num == counts.sum()
        for field in ("norm", "mean", "nan_count", "update_ratio"):
            got = {e.step: e.value for e in acc.Scalars(f"{field}/{name}")}
            for step in run.steps:
                figs = run.figures(step)[name]
                want = whole_figure(field, figs[field], figs["nan_count"], figs["inf_count"])
                if want is None:
                    assert step not in got
                else:
                    assert same(got[step], float(np.float32(want)))
    assert math.isnan(acc.Scalars("norm/0.weight")[2].value)  # step 3: a NaN gradient
    assert acc.Scalars("norm/2.bias")[2].value == math.inf


def test_event_records_are_tensorboards_own():
    """The CRC is TensorBoard's masked CRC-32C; the Event bytes parse to the Event protobuf
    builds from the same fields."""
    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    from gradexplorer.core.share import event_records as ER

    rng = np.random.default_rng(0)
    for size in (0, 1, 7, 8, 9, 15, 16, 17, 100, 1001):
        data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        assert ER.masked_crc32c(data) == masked_crc32c(data)
    datas = [rng.integers(0, 256, size, dtype=np.uint8).tobytes() for size in (0, 9, 1001, 17, 64)]
    framed = b"".join(struct.pack("<Q", len(d)) + struct.pack("<I", masked_crc32c(struct.pack("<Q", len(d))))
                      + d + struct.pack("<I", masked_crc32c(d)) for d in datas)
    assert ER.records(b"".join(datas), [len(d) for d in datas]) == framed  # many frames at once
    assert b"".join(map(ER.record, datas)) == framed
    limits, counts = np.sort(rng.standard_normal((2, 5)), axis=1), rng.integers(0, 9, (2, 5)) * 1.0
    header = np.array([[-1.0, 2.0, 12.0, 0.5, 3.0], [0.0, 1.0, 0.0, -0.0, 1e300]])
    values = [ER.scalar_values([b"norm/a", "é/b".encode()], np.array([1.5, 1e300]), {}),
              ER.ScalarLayout().encode(b"k", lambda: [b"x", b"y"], np.array([0.0, -2.0])),
              *ER.histogram_values([b"grad/a", b"grad/b"], header, limits, counts, {})]
    parsed = event_pb2.Event.FromString(ER.event(123.25, 7, values))
    V = summary_pb2.Summary.Value
    expected = event_pb2.Event(wall_time=123.25, step=7, summary=summary_pb2.Summary(value=[
        V(tag="norm/a", simple_value=1.5), V(tag="é/b", simple_value=float("inf")),
        V(tag="x", simple_value=0.0), V(tag="y", simple_value=-2.0),
        *(V(tag=f"grad/{t}", histo=summary_pb2.HistogramProto(
            min=h[0], max=h[1], num=h[2], sum=h[3], sum_squares=h[4], bucket_limit=lim, bucket=c))
          for t, h, lim, c in zip("ab", header.tolist(), limits.tolist(), counts.tolist(), strict=True))]))
    assert parsed == expected
    first = event_pb2.Event.FromString(ER.file_version_event(5.0))
    assert first == event_pb2.Event(wall_time=5.0, file_version="brain.Event:2")


def test_the_ledger_of_every_step_is_each_steps_ledger(runs):
    """``Run.ledger()`` (one query for the steps without a ledger row) is ``step_ledger`` of
    each step, on a run some of whose steps have no ledger row."""
    run = gx.open_run(runs["ledgerless"])
    assert [led.as_dict() for led in run.ledger()] == [run.step_ledger(s).as_dict() for s in run.steps]
    assert [led.optimizer_step for led in run.ledger(after=3)] == [4, 5, 6]
