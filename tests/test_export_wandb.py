"""``export --to wandb`` (an offline run read back record by record) and the one line each
export gives when its optional package is missing."""

from __future__ import annotations

import math
import sys

import pytest

import gradexplorer as gx
from gradexplorer.core.stats.records import whole_figure
from tests.share_helpers import write_run
from tests.wandb_records import history_rows


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return write_run(tmp_path_factory.mktemp("share") / "wandb-run", steps=4, nan_at=3)


def test_offline_wandb_run_holds_the_exact_histograms(run_dir, tmp_path, run_cli, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    code, out, err = run_cli("export", run_dir, "--to", "wandb", tmp_path / "wb")
    assert code == 0, err
    (runfile,) = (tmp_path / "wb" / "wandb").glob("offline-run-*/run-*.wandb")
    assert f"wandb sync {runfile.parent}" in out
    rows = history_rows(runfile)
    run = gx.open_run(run_dir)
    assert [r["_step"] for r in rows] == run.steps
    for row in rows:
        step = row["_step"]
        stats = run.figures(step)
        for name in run.parameters:
            edges, counts = run.histogram(step, name)
            assert row[f"gradients/{name}/values"] == counts.tolist()
            assert row[f"gradients/{name}/bins"] == edges.tolist()
            s = stats[name]
            assert repr(row[f"norm/{name}"]) == repr(whole_figure("norm", s["norm"], s["nan_count"],
                                                                  s["inf_count"]))
        assert row["run/loss"] == run.step_info(step)["loss"]
        assert row["_timestamp"] == pytest.approx(run.step_info(step)["time"], abs=1e-3)
    assert rows[2]["nan_count/0.weight"] == 1 and rows[2]["inf_count/2.bias"] == 1
    assert math.isnan(rows[2]["norm/0.weight"]) and rows[2]["norm/2.bias"] == math.inf


@pytest.mark.parametrize(("target", "module", "extra"), [
    ("tensorboard", "tensorboard", "tensorboard"), ("parquet", "pyarrow", "parquet"),
    ("wandb", "wandb", "wandb")])
def test_a_missing_package_is_one_line_naming_the_extra(run_dir, tmp_path, run_cli, monkeypatch,
                                                        target, module, extra):
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
    dest = tmp_path / ("out.parquet" if target == "parquet" else "out")
    code, _, err = run_cli("export", run_dir, "--to", target, dest)
    assert code == 2 and err.count("\n") == 1
    assert f"pip install 'gradexplorer[{extra}]'" in err and module in err
    assert not dest.exists()
