"""Crafted run directories (each table and field damaged) give one line naming what is wrong:
exit 2 from ``inspect``, ``compare`` and ``open``, a UserError from ``open_run`` and its reads.
Runs of format 3 (what ``watch`` writes) and of format 2 (names in every row, float64/int64
histogram blobs: a run written before format 3 and resumed)."""

from __future__ import annotations

import shutil
import sqlite3
import struct

import pytest
import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.core.runs import schema as S
from gradexplorer.core.runs.validate import LEAN_TABLES, OPTIONAL_TABLES, READER_TABLES
from tests.legacy_runs import legacy_run

DEEP = "[" * 100_000 + "]" * 100_000


def write_good_run(path, resume=False):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gx.watch(model, opt, path, bins=8, resume=resume) as rec:
        for i in range(3):
            rec.note_batch([i])
            opt.zero_grad()
            model(torch.randn(5, 4)).square().mean().backward()
            opt.step()
    return path


@pytest.fixture(scope="module")
def good_run(tmp_path_factory):
    return write_good_run(tmp_path_factory.mktemp("runs") / "good")


@pytest.fixture(scope="module")
def good_v2_run(tmp_path_factory):
    return write_good_run(legacy_run(tmp_path_factory.mktemp("runs") / "v2"), resume=True)


def crafted(source, target, sql: str, *args) -> str:
    shutil.copytree(source, target)
    db = sqlite3.connect(target / S.DATABASE)
    db.execute(sql, args) if args else db.executescript(sql)
    db.commit()
    db.close()
    return str(target)


ALL = ("inspect", "compare", "open")
CASES = {  # name: (SQL, its parameters, words the line must hold[, the commands that read it])
    **{f"no {t} table": (f"DROP {'VIEW' if t in S.LEAN_TABLES else 'TABLE'} {t}", (),
                         f"no {t} table") for t in READER_TABLES if t != "meta"},
    **{f"no {t} table": (f"DROP TABLE {t}", (), f"no {t} table") for t in LEAN_TABLES},
    "no meta table": ("DROP TABLE meta", (), "no such table: meta"),
    "no rank_norms column": ("ALTER TABLE rank_norms DROP COLUMN norm", (), "no column norm"),
    "no ledger column": ("ALTER TABLE ledger DROP COLUMN clip_coef", (), "no column clip_coef"),
    "no batches column": ("ALTER TABLE batches DROP COLUMN ids", (), "no column ids"),
    "no not_recorded column": ("ALTER TABLE not_recorded DROP COLUMN cause", (), "no column cause"),
    "not_recorded cause": ("INSERT INTO not_recorded VALUES (3, 'x', x'00')", (),
                           "table not_recorded", ("open",)),
    "no spike_events column": ("ALTER TABLE spike_events DROP COLUMN event", (), "no column event"),
    "no param_summaries column": ("ALTER TABLE param_summaries DROP COLUMN max_abs", (),
                                  "no column max_abs"),
    "no per_sample_norms column": ("ALTER TABLE per_sample_norms DROP COLUMN top", (),
                                   "no column top"),
    "no noise_steps column": ("ALTER TABLE noise_steps DROP COLUMN b_simple", (), "no column b_simple"),
    "no noise_params column": ("ALTER TABLE noise_params DROP COLUMN snr", (), "no column snr"),
    "noise figure": ("INSERT INTO noise_steps VALUES (3, 4, 5, 4.0, 'abc', 1, 1, 1, 1, 1, 1, 1, 1, 1)",
                     (), "table noise_steps at step 3, column g_small_sq holds str", ("inspect",)),
    "no noise_sources column": ("ALTER TABLE noise_sources DROP COLUMN ranks", (),
                                "no column ranks"),
    "noise source": ("INSERT INTO noise_steps VALUES (3, 4, 5, 4.0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1);"
                     "INSERT INTO noise_sources VALUES (3, 'elsewhere', 2)", (),
                     "table noise_sources at step 3 holds source 'elsewhere'", ("inspect",)),
    "batch json": ("UPDATE batches SET ids = '{bad'", (), "table batches", ("open",)),
    "spike event json": ("INSERT INTO spike_events VALUES (1, 1, '{bad')", (), "table spike_events",
                         ("inspect",)),
    "spike event shape": ("INSERT INTO spike_events VALUES (1, 1, '[1]')", (),
                          "does not hold a spike event", ("inspect",)),
    "ledger figure": ("UPDATE ledger SET grad_norm_accumulated = 'abc'", (),
                      "column grad_norm_accumulated holds str", ("inspect",)),
    "ledger lr": ("UPDATE ledger SET lr = '[\"a\"]'", (), "column lr", ("inspect",)),
    "ledger reason": ("UPDATE ledger SET skip_reason = x'00'", (), "column skip_reason",
                      ("inspect",)),
    # format 3: the tables under the views (a view's column is dropped with the view first)
    "no stats column": ("DROP VIEW stats; CREATE VIEW stats AS SELECT step, param AS name FROM "
                        "stat_rows", (), "table stats has no column numel"),
    "no stat_rows column": ("DROP VIEW stats; ALTER TABLE stat_rows DROP COLUMN update_ratio", (),
                            "table stat_rows has no column update_ratio"),
    "no histogram_rows column": ("DROP VIEW histograms; ALTER TABLE histogram_rows DROP COLUMN "
                                 "below", (), "no column below"),
    "no param_step_rows column": ("DROP VIEW param_steps; ALTER TABLE param_step_rows DROP COLUMN "
                                  "lr", (), "no column lr"),
    "no param_names column": ("DROP VIEW stats; DROP VIEW histograms; DROP VIEW param_steps; "
                              "ALTER TABLE param_names RENAME COLUMN name TO what", (),
                              "table param_names has no column name"),
    "param_steps figure": ("UPDATE param_step_rows SET exp_avg_norm = 'abc'", (),
                           "column exp_avg_norm holds str", ("inspect", "compare")),
    "cut count": ("UPDATE histogram_rows SET counts = x'0201'", (),
                  "column counts is 2 bytes, not counts"),
    "count width": ("UPDATE histogram_rows SET counts = x'03010203'", (),
                    "column counts is 4 bytes"),
    "negative count": ("UPDATE histogram_rows SET counts = ?", (b"\x08" + b"\xff" * 64,),
                       "none negative"),
    "edges for counts": ("UPDATE histogram_rows SET edges = zeroblob(24)", (),
                         "24 bytes of edges for 8 counts"),
    "text blob": ("UPDATE histogram_rows SET edges = 'abc'", (), "column edges holds str"),
    "decreasing edges": ("UPDATE histogram_rows SET edges = ?", (struct.pack("<2d", 1, 0),),
                         "edges that are not finite"),
    "text figure": ("UPDATE stat_rows SET norm = 'abc'", (), "column norm holds str 'abc'"),
    "text count": ("UPDATE stat_rows SET nan_count = 'x'", (), "column nan_count holds"),
    "has_grad": ("UPDATE stat_rows SET has_grad = 7", (), "column has_grad"),
    "numel": ("UPDATE stat_rows SET numel = -3", (), "column numel"),
    "bin extra": ("UPDATE histogram_rows SET above = 2.5", (), "column above"),
    "lost name": ("DELETE FROM param_names WHERE name = '0.weight'", (),
                  "parameter name of type NoneType"),
    "name blob": ("UPDATE param_names SET name = x'00' WHERE name = '2.bias'", (),
                  "parameter name of type bytes"),
    "histogram of no parameter": ("UPDATE histogram_rows SET param = 'x' WHERE param = 1", (),
                                  "parameter name of type NoneType", ("inspect", "open")),
    "step figure": ("UPDATE steps SET global_norm = x'00'", (), "column global_norm holds bytes",
                    ("inspect", "open")),
    "step ranks": ("UPDATE steps SET ranks = 'two'", (), "column ranks", ("inspect", "open")),
    "huge step": ("INSERT INTO steps VALUES (9223372036854775807, 0, 1, 1, 1, 1, 1)", (),
                  "step 9223372036854775807"),
    "negative step": ("UPDATE steps SET step = -step", (), "table steps holds step -"),
    "version 999": ("UPDATE meta SET value = '999' WHERE key = 'version'", (), "version 999"),
    "user_version 7": ("PRAGMA user_version = 7", (), "version 7"),
    "version text": ("UPDATE meta SET value = 'one' WHERE key = 'version'", (), "'one'"),
    "format": ("UPDATE meta SET value = 'other' WHERE key = 'format'", (), "not a gradexplorer run"),
    "bad json": ("UPDATE meta SET value = '{bad' WHERE key = 'structure'", (), "not valid JSON"),
    "deep json": ("UPDATE meta SET value = ? WHERE key = 'structure'", (DEEP,), "nested too deep"),
    "structure": ("UPDATE meta SET value = '[1, 2]' WHERE key = 'structure'", (), "must be an object"),
    "parameter shape": ("UPDATE meta SET value = json_set(value, '$.parameters[0].shape', "
                        "json('[\"a\"]')) WHERE key = 'structure'", (), "parameters[0].shape"),
    "settings bins": ("UPDATE meta SET value = json_set(value, '$.bins', 'many') "
                      "WHERE key = 'settings'", (), "bins", ("open",)),
    "snapshot path": ("INSERT INTO snapshots VALUES (3, '../../etc')", (), "table snapshots",
                      ("inspect",)),
    "snapshot blob path": ("INSERT INTO snapshots VALUES (2, x'00')", (),
                           "table snapshots", ("inspect",)),
}
V2_CASES = {  # format 2: the tables that name the parameter in every row
    **{f"no {t} table": (f"DROP TABLE {t}", (), f"no {t} table") for t in READER_TABLES
       if t in S.LEAN_TABLES},
    "no stats column": ("ALTER TABLE stats DROP COLUMN update_ratio", (), "column update_ratio"),
    "no histograms column": ("ALTER TABLE histograms DROP COLUMN below", (), "no column below"),
    "no param_steps column": ("ALTER TABLE param_steps DROP COLUMN lr", (), "no column lr"),
    "param_steps figure": ("UPDATE param_steps SET exp_avg_norm = 'abc'", (),
                           "column exp_avg_norm holds str", ("inspect", "compare")),
    "short blob": ("UPDATE histograms SET counts = x'0102'", (), "column counts is 2 bytes"),
    "edges for counts": ("UPDATE histograms SET edges = zeroblob(16)", (), "2 edges for 8 counts"),
    "text blob": ("UPDATE histograms SET edges = 'abc'", (), "column edges holds str"),
    "negative count": ("UPDATE histograms SET counts = ?", (b"\xff" * 64,), "negative count"),
    "decreasing edges": ("UPDATE histograms SET edges = ?", (bytes(range(72))[::-1],), "edges"),
    "text figure": ("UPDATE stats SET norm = 'abc'", (), "column norm holds str 'abc'"),
    "text count": ("UPDATE stats SET nan_count = 'x'", (), "column nan_count holds"),
    "has_grad": ("UPDATE stats SET has_grad = 7", (), "column has_grad"),
    "numel": ("UPDATE stats SET numel = -3", (), "column numel"),
    "bin extra": ("UPDATE histograms SET above = 2.5", (), "column above"),
}
GRAPH_CASES = {  # the graph only the app reads: `open` refuses it
    "graph": ("UPDATE meta SET value = '[1, 2]' WHERE key = 'graph'", (), "meta 'graph'"),
    "graph edge": ("UPDATE meta SET value = json_set(value, '$.edges[0].source', 'x') "
                   "WHERE key = 'graph'", (), "edges[0] must join two of its nodes"),
    "graph deep": ("UPDATE meta SET value = ? WHERE key = 'graph'", (DEEP,), "nested too deep"),
}


def one_line(code, out, err, words):
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gradexplorer: error: "), err
    assert "Traceback" not in out + err and words in lines[0], (words, lines[0])


def read_everything(path):
    with gx.open_run(path) as run:
        _ = run.structure, run.parameters, run.snapshots
        for step in run.steps:
            run.step_gradients(step)
            run.figures(step), run.rank_norms(step), run.step_info(step)
            run.batch_ids(step), run.not_recorded(step)
        run.spike_events()
        gx.runs.noise_rows(run)
        list(run.follow(timeout=0))


def test_the_cases_cover_every_table_the_reader_needs():
    dropped = {case[0].split()[-1] for case in CASES.values()
               if case[0].startswith("DROP ") and ";" not in case[0]}
    assert dropped == set(READER_TABLES) | set(LEAN_TABLES)
    assert {case[0].split()[-1] for case in V2_CASES.values()
            if case[0].startswith("DROP ")} == set(READER_TABLES) & set(S.LEAN_TABLES)
    altered = {case[0].split("ALTER TABLE ")[1].split()[0] for case in [
        *CASES.values(), *V2_CASES.values()] if "ALTER TABLE" in case[0]}
    assert set(OPTIONAL_TABLES) | set(LEAN_TABLES) <= altered


@pytest.mark.parametrize("case", [*(("3", c) for c in sorted(CASES)),
                                  *(("2", c) for c in sorted(V2_CASES))])
def test_crafted_run_gives_one_line_from_inspect_compare_open(run_cli, good_run, good_v2_run,
                                                              tmp_path, case):
    version, case = case
    sql, args, words, *commands = (CASES if version == "3" else V2_CASES)[case]
    good_run = good_run if version == "3" else good_v2_run
    bad = crafted(good_run, tmp_path / "bad", sql, *args)
    for argv in (("inspect", bad), ("inspect", bad, "--step", "1"), ("compare", good_run, bad),
                 ("compare", bad, good_run), ("open", bad)):
        if argv[0] in (commands[0] if commands else ALL):
            one_line(*run_cli(*argv), words)
    with pytest.raises(gx.UserError, match=None) as caught:
        read_everything(bad)
    assert words in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("case", sorted(GRAPH_CASES))
def test_a_crafted_graph_is_refused_by_open(run_cli, good_run, tmp_path, case):
    sql, args, words = GRAPH_CASES[case]
    bad = crafted(good_run, tmp_path / "bad", sql, *args)
    one_line(*run_cli("open", bad), words)
    with gx.open_run(bad) as run, pytest.raises(gx.UserError, match="graph"):
        run.graph  # noqa: B018


def test_the_good_run_reads_whole(run_cli, good_run):
    read_everything(good_run)
    code, out, err = run_cli("inspect", good_run)
    assert code == 0 and "steps 1..3" in out, err


@pytest.mark.parametrize("step", ["4", "-1", str(2**70)])
def test_steps_beyond_the_run_are_refused(run_cli, good_run, step):
    one_line(*run_cli("inspect", good_run, "--step", step), "step")
    one_line(*run_cli("compare", good_run, "--steps", "1", step), "step")


OLDER_CASES = {  # damage at step 1 only: the newest step is whole, the run-wide reads find it
    "older figure": ("UPDATE stat_rows SET norm = 'abc' WHERE step = 1", "column norm holds str"),
    "older count": ("UPDATE stat_rows SET nan_count = 'x' WHERE step = 1", "column nan_count holds"),
    "older has_grad": ("UPDATE stat_rows SET has_grad = 7 WHERE step = 1", "column has_grad"),
    "older blob": ("UPDATE histogram_rows SET counts = x'0201' WHERE step = 1",
                   "column counts is 2 bytes"),
    "older edges": ("UPDATE histogram_rows SET edges = zeroblob(24) WHERE step = 1",
                    "24 bytes of edges for 8 counts"),
    "older time": ("UPDATE steps SET time = 'abc' WHERE step = 1", "column time holds str"),
    "older loss": ("UPDATE steps SET loss = x'00' WHERE step = 1", "column loss holds bytes"),
}
OLDER_V2_CASES = {  # the same in a run of format 2
    "older figure": ("UPDATE stats SET norm = 'abc' WHERE step = 1", "column norm holds str"),
    "older blob": ("UPDATE histograms SET counts = x'0102' WHERE step = 1", "column counts is 2 bytes"),
    "older edges": ("UPDATE histograms SET edges = zeroblob(16) WHERE step = 1", "2 edges for 8 counts"),
}


def read_history(path):
    with gx.open_run(path) as run:
        history = gx.runs.RunHistory(run)
        history.step_figures()
        history.nonfinite_events()
        history.parameter_summaries()
        for field in ("norm", "nan_count"):
            history.stat_series(field, run.parameters)
        for name in run.parameters:
            history.histogram_matrix(name, history.histogram_steps())


@pytest.mark.parametrize("case", [*(("3", c) for c in sorted(OLDER_CASES)),
                                  *(("2", c) for c in sorted(OLDER_V2_CASES))])
def test_an_older_damaged_step_is_one_line_from_export_report_and_run_history(
        run_cli, good_run, good_v2_run, tmp_path, case):
    version, case = case
    sql, words = (OLDER_CASES if version == "3" else OLDER_V2_CASES)[case]
    good_run = good_run if version == "3" else good_v2_run
    bad = crafted(good_run, tmp_path / "bad", sql)
    one_line(*run_cli("export", bad, "--to", "csv", tmp_path / "out.csv", "--histograms"), words)
    one_line(*run_cli("report", bad, "--out", tmp_path / "out.html"), words)
    with pytest.raises(gx.UserError) as caught:
        read_history(bad)
    assert words in str(caught.value) and "\n" not in str(caught.value)
    for argv in (("spikes", bad), ("diverge", good_run, bad), ("report", good_run, bad, "--out",
                                                               tmp_path / "two.html")):
        code, out, err = run_cli(*argv)  # these may not read the damaged step: never a traceback
        assert code == 0 or len(err.strip().splitlines()) == 1, (argv, code, err)


@pytest.mark.parametrize("value", [0, 7, -3, 2**62, 1.5, -0.0, float("inf"), "nan", "NaN", "1.5",
                                   "", b"\x00\x01", None])
@pytest.mark.parametrize("column", ["norm", "nan_count"])
def test_the_sql_check_of_a_stored_value_is_the_python_one(value, column):
    """The run-wide reads check values inside SQL (``validate.sql_test``); what it accepts is
    exactly what ``validate.figure``/``count`` accept for the same stored value."""
    from gradexplorer.core.runs import validate as V

    db = sqlite3.connect(":memory:")
    db.execute(f"CREATE TABLE t ({column})")
    db.execute("INSERT INTO t VALUES (?)", (value,))
    stored, = db.execute(f"SELECT {column} FROM t").fetchone()
    in_sql = bool(db.execute(f"SELECT {V.sql_test(column)} FROM t").fetchone()[0])
    check = V.count if column in V.COUNT_FIELDS else V.figure
    try:
        check(stored, "here")
        in_python = True
    except gx.UserError:
        in_python = False
    assert in_sql == in_python, (stored, in_sql, in_python)
