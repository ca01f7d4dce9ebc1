"""``gradexplorer export``: TensorBoard events read back by TensorBoard's own reader, long-form
CSV and Parquet through pandas, an offline wandb run read back record by record."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gradexplorer as gx
from gradexplorer.core.runs.history import RunHistory
from gradexplorer.core.share.tensorboard_events import tensorboard_buckets
from gradexplorer.core.stats.records import STAT_FIELDS, Histogram, whole_figure
from tests.share_helpers import write_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return write_run(tmp_path_factory.mktemp("share") / "mlp-run", steps=6, nan_at=4)


def tensorboard_reader(folder):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder), size_guidance={"histograms": 0, "scalars": 0})
    acc.Reload()
    return acc


def test_tensorboard_histograms_are_gradexplorers_bucket_for_bucket(run_dir, tmp_path, run_cli):
    code, out, err = run_cli("export", run_dir, "--to", "tensorboard", tmp_path / "tb")
    assert code == 0, err
    folder = tmp_path / "tb" / "mlp-run"
    assert str(folder) in out
    acc = tensorboard_reader(folder)
    run = gx.open_run(run_dir)
    assert sorted(acc.Tags()["histograms"]) == sorted(f"grad/{n}" for n in run.parameters)
    checked = 0
    for name in run.parameters:
        events = acc.Histograms(f"grad/{name}")
        assert [e.step for e in events] == run.steps
        for event in events:
            edges, counts = run.histogram(event.step, name)
            value = event.histogram_value
            assert list(value.bucket) == counts.tolist()  # every bucket count, exactly
            assert list(value.bucket_limit) == edges[1:].tolist()  # right edges, exactly
            assert value.min == edges[0] and value.max == edges[-1]
            stats = run.figures(event.step)[name]
            finite = counts.sum()
            assert value.num == finite
            assert value.sum_squares == pytest.approx(stats["norm"] ** 2, rel=1e-12)
            checked += 1
    assert checked == len(run.parameters) * len(run.steps)
    # the NaN step: the histograms count the finite values; the NaN/Inf counts are scalars
    nan = acc.Scalars("nan_count/0.weight")
    assert [s.value for s in nan] == [run.figures(s)["0.weight"]["nan_count"] for s in run.steps]
    assert nan[3].value == 1 and acc.Scalars("inf_count/2.bias")[3].value == 1
    loss = acc.Scalars("run/loss")
    rows = run.step_rows()
    assert [s.value for s in loss] == pytest.approx([r["loss"] for r in rows], rel=1e-6)
    assert [s.wall_time for s in loss] == pytest.approx([r["time"] for r in rows], abs=1e-3)
    assert math.isnan(acc.Scalars("norm/0.weight")[3].value)  # step 4: its NaN, never the finite part's
    assert acc.Scalars("norm/2.bias")[3].value == math.inf
    norm = acc.Scalars("norm/2.weight")
    assert [s.value for s in norm] == pytest.approx(
        [run.figures(s)["2.weight"]["norm"] for s in run.steps], rel=1e-6)
    assert "run/global_norm" in acc.Tags()["scalars"]


def test_tensorboard_export_refuses_to_mix_into_an_earlier_one(run_dir, tmp_path, run_cli):
    assert run_cli("export", run_dir, "--to", "tensorboard", tmp_path)[0] == 0
    code, _, err = run_cli("export", run_dir, "--to", "tensorboard", tmp_path)
    assert code == 2 and "--overwrite" in err and err.count("\n") == 1
    code, _, err = run_cli("export", run_dir, "--to", "tensorboard", tmp_path, "--overwrite",
                           "--stride", "4", "--params", "2.*", "--figures", "norm")
    assert code == 0, err
    acc = tensorboard_reader(tmp_path / "mlp-run")
    assert sorted(acc.Tags()["histograms"]) == ["grad/2.bias", "grad/2.weight"]
    # every 4th, the last, and step 4 (NaN/Inf: flagged, never thinned away)
    assert [e.step for e in acc.Histograms("grad/2.bias")] == [1, 4, 5, 6]
    assert {t.split("/")[0] for t in acc.Tags()["scalars"]} == {"norm", "run"}


def test_values_outside_a_fixed_range_become_a_bucket_below_and_above():
    h = Histogram(np.linspace(-1, 1, 5), np.array([1, 2, 3, 4]), below=2, above=5)
    args = tensorboard_buckets(h, {"min": -3.0, "max": 7.5, "mean": 0.5, "norm": 4.0})
    assert args["bucket_counts"] == [2, 1, 2, 3, 4, 5]
    assert args["bucket_limits"] == [-1.0, -0.5, 0.0, 0.5, 1.0, 7.5]
    assert args["min"] == -3.0 and args["max"] == 7.5 and args["num"] == 17
    assert args["sum"] == 8.5 and args["sum_squares"] == 16.0


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_long_form_round_trips_through_pandas(run_dir, tmp_path, run_cli, fmt):
    pd = pytest.importorskip("pandas")
    if fmt == "parquet":
        pytest.importorskip("pyarrow")
    path = tmp_path / f"run.{fmt}"
    code, out, err = run_cli("export", run_dir, "--to", fmt, path, "--histograms")
    assert code == 0, err
    df = pd.read_csv(path) if fmt == "csv" else pd.read_parquet(path)
    assert list(df.columns) == ["step", "wall_time", "parameter", "figure", "value", "bin_lo", "bin_hi"]
    assert f"{len(df):,} rows" in out
    run = gx.open_run(run_dir)
    per_param = df[df.figure.isin(STAT_FIELDS) & (df.parameter.fillna("") != "")]  # not the step's
    assert len(per_param) == len(run.steps) * len(run.parameters) * len(STAT_FIELDS)
    for step in run.steps:
        stats = run.figures(step)
        for name, figs in stats.items():
            got = per_param[(per_param.step == step) & (per_param.parameter == name)]
            values = dict(zip(got.figure, got.value, strict=True))
            for field in STAT_FIELDS:
                want = whole_figure(field, figs[field], figs["nan_count"], figs["inf_count"])
                assert (math.isnan(values[field]) if want is None or math.isnan(want)
                        else values[field] == want), (step, name, field)  # exact: repr/float64
            if step == 4 and name in ("0.weight", "2.bias"):  # its gradient held a NaN / an Inf
                assert math.isnan(values["norm"]) if name == "0.weight" else values["norm"] == math.inf
            edges, counts = run.histogram(step, name)
            bins = df[(df.step == step) & (df.parameter == name) & (df.figure == "hist_count")]
            assert bins.value.tolist() == counts.tolist()
            assert bins.bin_lo.tolist() == edges[:-1].tolist() and bins.bin_hi.tolist() == edges[1:].tolist()
    run_rows = df[df.figure == "loss"]
    assert run_rows.value.tolist() == [r["loss"] for r in run.step_rows()]
    assert run_rows.parameter.isna().all() if fmt == "csv" else (run_rows.parameter == "").all()


def test_long_form_without_histograms_by_default_and_bad_destinations(run_dir, tmp_path, run_cli):
    pd = pytest.importorskip("pandas")
    assert run_cli("export", run_dir, "--to", "csv", tmp_path / "a.csv")[0] == 0
    assert "hist_count" not in set(pd.read_csv(tmp_path / "a.csv").figure)
    code, _, err = run_cli("export", run_dir, "--to", "csv", tmp_path / "a.parquet")
    assert code == 2 and ".csv" in err and err.count("\n") == 1
    code, _, err = run_cli("export", tmp_path, "--to", "csv", tmp_path / "b.csv")
    assert code == 2 and "not a gradexplorer run directory" in err
    code, _, err = run_cli("export", run_dir, "--to", "csv", tmp_path / "c.csv", "--figures", "size")
    assert code == 2 and "unknown figure 'size'" in err
    code, _, err = run_cli("export", run_dir, "--to", "csv", tmp_path / "c.csv", "--params", "zz*")
    assert code == 2 and "no parameter matches zz*" in err
    assert not list(tmp_path.glob(".c.csv*")) and not (tmp_path / "c.csv").exists()


def test_step_figures_take_whatever_the_run_records_per_step(run_dir):
    """A step ledger flows through: every number the step rows and ``step_info`` hold, at every
    step, into the step figures (read in one query) and every export."""
    from gradexplorer.core.share.long_form import long_rows

    run = gx.open_run(run_dir)
    steps, times, figures = RunHistory(run).step_figures()
    assert steps.tolist() == run.steps
    assert times.tolist() == [r["time"] for r in run.step_rows()]
    for i, step in enumerate(run.steps):
        for key, value in run.step_info(step).items():
            if key != "time" and isinstance(value, (int, float)) and not isinstance(value, bool):
                assert figures[key][i] == value or value != value and figures[key][i] != figures[key][i]
    assert "step" not in figures and "time" not in figures
    assert "grad_norm_accumulated" in figures and "skipped" not in figures
    rows = [r for r in long_rows(RunHistory(run)) if r[3] == "grad_norm_accumulated"]
    ledgers = [run.step_ledger(s) for s in run.steps]
    assert [(r[0], r[4]) for r in rows] == [(led.optimizer_step, led.grad_norm_accumulated)
                                            for led in ledgers if led.grad_norm_accumulated is not None]


def test_exports_old_every_flag_is_stride_with_a_note_and_not_with_stride(run_dir, tmp_path, run_cli):
    """``export --every K`` (every K-th step) was a second meaning of ``--every`` (``run``'s old
    name of ``--histogram-every``): it is ``--stride`` now; the old name still works, with a
    one-line note, and both together are a usage error."""
    code, _, err = run_cli("export", run_dir, "--to", "csv", tmp_path / "a.csv", "--every", "4")
    assert code == 0 and err.strip() == ("gradexplorer: --every is now --stride; the old name "
                                         "will go in a later release")
    code, _, _ = run_cli("export", run_dir, "--to", "csv", tmp_path / "b.csv", "--stride", "4")
    assert code == 0 and (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    code, _, _ = run_cli("export", run_dir, "--to", "csv", tmp_path / "c.csv", "--every", "4",
                         "--stride", "2")
    assert code == 2 and not (tmp_path / "c.csv").exists()


def test_stat_series_says_nan_or_inf_where_the_gradient_held_them(run_dir):
    """At step 4 one element of 0.weight's gradient was NaN and one of 2.bias's +Inf: the
    series of norm and max |g| say nan and inf there (the run stores the finite part's), as the
    tiles and CSV do; other figures and the finite steps are the stored ones."""
    run = gx.open_run(run_dir)
    names = ["0.weight", "2.bias", "0.bias"]
    stored = {step: run.figures(step) for step in run.steps}
    assert math.isfinite(stored[4]["0.weight"]["norm"]) and stored[4]["0.weight"]["nan_count"] == 1
    for field in ("norm", "abs_max", "mean"):
        steps, series = RunHistory(run).stat_series(field, names)
        assert steps.tolist() == run.steps
        for name in names:
            want = [whole_figure(field, stored[s][name][field], stored[s][name]["nan_count"],
                                 stored[s][name]["inf_count"]) for s in run.steps]
            assert series[name].tolist() == pytest.approx(want, nan_ok=True)
        if field != "mean":
            assert math.isnan(series["0.weight"][3]) and series["2.bias"][3] == math.inf
            assert math.isfinite(series["0.bias"][3])
        else:
            assert math.isfinite(series["0.weight"][3])  # the mean is over finite elements, as stored
    _, at = RunHistory(run).stat_series("norm", names, [4])
    assert math.isnan(at["0.weight"][0]) and at["2.bias"][0] == math.inf


def test_a_live_history_series_says_nan_where_the_gradient_held_nan():
    """The live session's per-parameter series (the Runs dock's figure) as a run's: the norm
    and max |g| of layer 3's weight at its NaN step are NaN, its mean the finite part's."""
    from tests.share_helpers import recorded_history

    history = recorded_history(layers=4, steps=3, nan_layer=3)
    last = history.latest().params["3.weight"]
    assert last.nan_count == 1 and math.isfinite(last.norm)  # the record keeps the finite part's
    for field in ("norm", "abs_max"):
        steps, values = history.series("3.weight", field)
        assert len(steps) == 3
        assert math.isnan(values[-1]) and np.isfinite(values[:-1]).all()
    assert history.series("3.weight", "mean")[1][-1] == last.mean
    assert history.series("2.weight", "norm")[1][-1] == history.latest().params["2.weight"].norm
