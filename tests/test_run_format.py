"""Run format 3: histograms stored as (lo, hi) and varint counts read back bit for bit, rows
that name a parameter by id, and runs of format 2 read (and resumed) as they were written."""

from __future__ import annotations

import json
import math
import sqlite3

import numpy as np
import pytest
import torch
from torch import nn

import gradexplorer as gx
from gradexplorer.core.runs import histogram_rows as H
from gradexplorer.core.runs import schema as S
from tests.legacy_runs import FIXTURE, fixture_copy
from tests.script_helpers import load_script


def bits(a) -> bytes:
    return np.asarray(a, np.float64).tobytes()  # -0.0 and 0.0 apart


class Odd(nn.Module):
    """A linear model and three parameters whose histograms take ``histogram_edges``' other
    ranges: a gradient of ±1e308 (float64: the span overflows, edges of the halves doubled,
    not equal-width in float64), a constant 2**60 (no float64 between lo - 0.5 and hi + 0.5:
    the narrow fallback) and 0 (lo == hi: the range widened by ½ each side)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 3)
        self.wide = nn.Parameter(torch.ones(2, dtype=torch.float64))
        self.huge = nn.Parameter(torch.ones(4))
        self.still = nn.Parameter(torch.ones(5))

    def forward(self, x):
        far = torch.tensor([-1e308, 1e308], dtype=torch.float64)
        return (self.fc(x).square().mean() + (self.wide * far).sum() + (self.huge * 2.0**60).sum()
                + 0 * self.still.sum())


def watched(path, steps=3, **kwargs):
    torch.manual_seed(0)
    model = Odd()
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    records = []
    with gx.watch(model, opt, path, **kwargs) as rec:
        for _ in range(steps):
            opt.zero_grad()
            model(torch.randn(32, 6)).backward()
            opt.step()
            records.append(rec.latest())
    return records


@pytest.mark.parametrize("bins", [1, 7, 64])
def test_histograms_read_back_bit_for_bit_and_rows_are_lean(tmp_path, bins):
    records = watched(tmp_path / "run", bins=bins)
    with gx.open_run(tmp_path / "run") as run:
        assert run.version == S.VERSION == 3
        history = gx.runs.RunHistory(run)
        for record in records:
            read = run.histograms(record.step)
            assert list(read) == sorted(record.histograms)  # the order version 2 read them in
            for name, h in record.histograms.items():
                got = read[name]
                assert bits(got.edges) == bits(h.edges) and got.counts.dtype == np.int64
                assert got.counts.tolist() == np.asarray(h.counts).tolist()
                assert (got.nan_count, got.inf_count, got.below, got.above) == (
                    h.nan_count, h.inf_count, h.below, h.above)
                e, c = run.histogram(record.step, name)  # one row alone: decode, not the block
                assert bits(e) == bits(h.edges) and c.tolist() == got.counts.tolist()
        for name in run.parameters:
            m = history.histogram_matrix(name, run.steps)
            assert bits(m.edges) == bits([r.histograms[name].edges for r in records])
        rows = run._rows("SELECT name, edges, counts FROM histograms WHERE step = 3")
    sizes = {name: (len(e), len(c)) for name, e, c in rows}
    for name, h in records[-1].histograms.items():  # (lo, hi) wherever they give every edge back
        same = bits(H.equal_width(h.edges[[0]], h.edges[[-1]], bins)) == bits([h.edges])
        assert sizes[name][0] == (16 if same or bins == 1 else 8 * (bins + 1)), name
        top = int(np.max(h.counts))  # counts in the narrowest of 1, 2, 4, 8 bytes, after it
        assert sizes[name][1] == 1 + bins * next(w for w in (1, 2, 4, 8) if top < 2 ** (8 * w))
    assert sizes["wide"][0] == (16 if bins == 1 else 8 * (bins + 1))
    assert sizes["huge"] == sizes["still"] == (16, 1 + bins)  # equal-width; one byte a count


def test_figures_read_back_from_rows_that_name_parameters_by_id(tmp_path):
    records = watched(tmp_path / "run", update_ratio=True)
    db = sqlite3.connect(tmp_path / "run" / S.DATABASE)
    assert dict(db.execute("SELECT id, name FROM param_names")) == {
        1: "fc.bias", 2: "fc.weight", 3: "huge", 4: "still", 5: "wide"}  # in name order, once
    assert db.execute("SELECT typeof(param), COUNT(*) FROM stat_rows GROUP BY 1").fetchall() == [
        ("integer", 15)]
    db.close()
    with gx.open_run(tmp_path / "run") as run:
        for record in records:
            for name, stats in run.param_stats(record.step).items():
                assert stats == record.params[name]


def test_counts_and_edges_encode_exactly():
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 2**63 - 1, (6, 9), dtype=np.int64) >> rng.integers(0, 63, (6, 9))
    counts[0] = [0, 1, 127, 128, 16383, 16384, 2**56, 2**63 - 1, 0]
    counts[1], counts[3], counts[4] = counts[1] % 256, counts[3] % 65536, counts[4] % 2**32
    lo = rng.standard_normal(6) * 10.0 ** rng.integers(-300, 300, 6)
    edges = H.equal_width(lo, lo + np.abs(lo) + 1e-300, 9)
    edges[2] = np.sort(rng.standard_normal(10))  # edges of no equal width: kept whole
    rows = H.encode_rows(edges, counts)
    assert [len(e) for e, _ in rows] == [16, 16, 80, 16, 16, 16]
    assert [c[0] for _, c in rows] == [8, 1, 8, 2, 4, 8] and counts[1].max() > 127
    block = H.decode_block([(i, e, c, 0, 0, 0, 0) for i, (e, c) in enumerate(rows)], 3, int)
    for i, (e, c) in enumerate(rows):
        one = H.decode(e, c, (0, 0, 0, 0), 3, "here")
        assert bits(one[0]) == bits(edges[i]) and one[1].tolist() == counts[i].tolist()
        assert bits(block[i][1]) == bits(edges[i]) and block[i][2].tolist() == counts[i].tolist()
    with pytest.raises(ValueError):
        H.encode_rows(edges[:1], -counts[:1] - 1)


@pytest.mark.parametrize("edges, counts, words", [
    (bits([0, 1]), b"\x02\x01\x00\x02", "counts is 4 bytes, not counts"),
    (bits([0, 1]), b"\x03\x01\x02\x03", "counts is 4 bytes"),
    (bits([0, 1]), b"\x08" + b"\xff" * 8, "none negative"),
    (bits([0, 1]), b"", "counts is 0 bytes"),
    (bits([0, 1]), b"\x01", "for 0 counts"),
    (bits([0, 1, 2]), b"\x01\x02\x03\x04", "24 bytes of edges for 3 counts"),
    (bits([1, 0]), b"\x01\x02\x03", "not finite and increasing"),
    (bits([0, math.inf]), b"\x01\x02\x03", "not finite and increasing"),
    ("abc", b"\x01\x01", "column edges holds str"),
])
def test_a_damaged_row_is_one_line(edges, counts, words):
    with pytest.raises(gx.UserError, match=None) as caught:
        H.decode(edges, counts, (0, 0, 0, 0), 3, "run 'r', table histograms at step 1 (w)")
    assert words in str(caught.value) and "\n" not in str(caught.value)
    assert H.decode_block([("w", edges, counts, 0, 0, 0, 0)] * 2, 3) is None


def legacy_read(path):
    load = load_script("tests", "data", "make_run_v2.py")
    return json.dumps(json.loads(json.dumps(load.read(path))), sort_keys=True)


def test_a_version_2_run_reads_as_the_gradexplorer_that_wrote_it_read_it(tmp_path):
    run_dir = fixture_copy(tmp_path / "old")
    expected = json.loads((FIXTURE / "expected.json").read_text())
    assert expected["version"] == 2 and legacy_read(run_dir) == json.dumps(expected, sort_keys=True)
    db = sqlite3.connect(run_dir / S.DATABASE)  # and as its blobs say, read here with numpy alone
    raw = db.execute("SELECT step, name, edges, counts FROM histograms").fetchall()
    db.close()
    with gx.open_run(run_dir) as run:
        assert run.version == 2 and len(raw) == 9
        for step, name, edges, counts in raw:
            e, c = run.histogram(step, name)
            assert bits(e) == edges and c.tolist() == np.frombuffer(counts, "<i8").tolist()


def test_a_resumed_version_2_run_goes_on_in_version_2(tmp_path):
    run_dir = fixture_copy(tmp_path / "old")
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    model[2].bias.requires_grad_(False)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    with gx.watch(model, opt, run_dir, bins=8, resume=True) as rec:
        opt.zero_grad()
        model(torch.randn(5, 3)).square().mean().backward()
        opt.step()
        record = rec.latest()
    with gx.open_run(run_dir) as run:
        assert run.version == 2 and run.steps == [1, 2, 3, 4]
        for name, h in record.histograms.items():
            e, c = run.histogram(4, name)
            assert bits(e) == bits(h.edges) and c.tolist() == np.asarray(h.counts).tolist()
        assert run.param_stats(4)["0.weight"] == record.params["0.weight"]
        rows = run._rows("SELECT length(edges) FROM histograms WHERE step = 4")
    assert {r[0] for r in rows} == {8 * 9}  # whole float64 edges, as version 2 wrote them
    assert legacy_read(run_dir).startswith("{")  # and the older steps read as before
    expected = json.loads((FIXTURE / "expected.json").read_text())
    with gx.open_run(run_dir) as run:
        assert json.dumps(run.figures(2), sort_keys=True) == json.dumps(expected["figures"]["2"],
                                                                        sort_keys=True)
