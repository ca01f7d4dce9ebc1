"""``gradexplorer inspect`` of a run's step or of a snapshot: a gradient holding NaN reads norm
and max |g| ``NaN`` (as the app and the report write it), one holding +Inf ``inf``, never the
finite part's figures."""

from __future__ import annotations

import math

from tests.share_helpers import write_run


def cells(out: str, name: str) -> list[str]:
    return next(line.split() for line in out.splitlines() if line.split()[:1] == [name])


def test_inspect_of_a_nan_step_writes_nan_and_inf(tmp_path, run_cli):
    import gradexplorer as gx

    path = write_run(tmp_path / "run", steps=5, nan_at=4)
    figs = gx.open_run(path).figures(4)
    assert math.isfinite(figs["0.weight"]["norm"]) and figs["0.weight"]["nan_count"] == 1
    code, out, err = run_cli("inspect", path, "--step", "4")
    assert code == 0, err
    weight, bias = cells(out, "0.weight"), cells(out, "2.bias")
    assert weight[2:5] == ["NaN", "NaN", "1/0"]  # shape, norm, max |g|, NaN/Inf
    assert bias[2:5] == ["inf", "inf", "0/1"]
    assert cells(out, "0.bias")[2] == f"{figs['0.bias']['norm']:.4g}"  # a healthy one as before
    # the snapshot the NaN step left: the same words
    code, out, err = run_cli("inspect", gx.open_run(path).snapshots[4])
    assert code == 0, err
    assert cells(out, "0.weight")[2:4] == ["NaN", "NaN"] and cells(out, "2.bias")[2:4] == ["inf", "inf"]
