"""``gradexplorer report``: one self-contained HTML file with every section, its figures equal to
the run's; rendered by a real headless Chromium when one is installed."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser

import numpy as np
import pytest

import gradexplorer as gx
from gradexplorer.core.share.report_html import SECTIONS
from gradexplorer.core.stats.module_rollup import module_gradients
from tests.share_helpers import write_run

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


class Page(HTMLParser):
    """Ids, external references, tables (cells' exact values) and images of an HTML page."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.ids, self.external, self.tables, self.images = set(), [], {}, []
        self._table, self._row, self._text = None, None, False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        for key in ("src", "href"):
            if a.get(key) and not a[key].startswith(("#", "data:")):
                self.external.append(a[key])
        if tag in ("link", "iframe", "object", "embed"):
            self.external.append(tag)
        if tag == "table" and "id" in a:
            self._table = self.tables.setdefault(a["id"], [])
        elif tag == "tr" and self._table is not None:
            self._row = []
            self._table.append(self._row)
        elif tag == "td" and self._row is not None:
            self._row.append(a.get("data-v"))
            self._text = a.get("data-v") is None  # a text cell (a name): its text instead
        if tag == "image":
            self.images.append(a["href"])

    def handle_data(self, data):
        if self._text and self._row:
            self._row[-1] = (self._row[-1] or "") + data

    def handle_endtag(self, tag):
        if tag == "table":
            self._table = None
        if tag == "td":
            self._text = False


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return write_run(tmp_path_factory.mktemp("report") / "report-run", steps=40, nan_at=25, bins=32,
                     hooks={"2": "scale:0.5"})


@pytest.fixture(scope="module")
def report(run_dir, tmp_path_factory):
    from gradexplorer.cli import main

    out = tmp_path_factory.mktemp("html") / "report.html"
    assert main(["report", str(run_dir), "--out", str(out), "--top", "3"]) == 0
    return out


def test_report_has_every_section_and_needs_no_network(report):
    text = report.read_text(encoding="utf-8")
    page = Page(text)
    assert set(SECTIONS) <= page.ids
    assert page.external == []  # nothing fetched: no link, script src, remote image
    assert not re.search(r"https?://", text)
    assert "<script src" not in text and "@import" not in text and "url(" not in text
    assert page.images and all(i.startswith("data:image/png;base64,") for i in page.images)


def test_report_tables_hold_the_runs_figures(report, run_dir):
    page = Page(report.read_text(encoding="utf-8"))
    run = gx.open_run(run_dir)
    last = run.steps[-1]
    modules = module_gradients(run.step_gradients(last).params)
    rows = page.tables["module-table"][1:]
    assert len(rows) == len(modules)
    norms = [float(r[3]) for r in rows[1:]]  # the model first, then ranked by norm
    assert norms == sorted(norms, reverse=True)
    assert float(rows[0][3]) == modules[""].norm  # exact: the cells keep the float's repr
    assert {float(r[3]) for r in rows} == {m.norm for m in modules.values()}
    params = page.tables["parameter-table"][1:]
    stats = run.figures(last)
    assert len(params) == len(run.parameters)
    assert {float(r[3]) for r in params} == {s["norm"] for s in stats.values()}  # norm at the last step
    # the run's largest norm, NaN/inf for a parameter whose gradient held one at any step
    every = [run.figures(step) for step in run.steps]
    for r in params:
        figs = [f[r[0]] for f in every]
        want = (math.nan if any(f["nan_count"] for f in figs) else math.inf
                if any(f["inf_count"] for f in figs) else max(f["norm"] for f in figs))
        assert r[1] == repr(want)
    # NaN/Inf first: the two parameters with the event lead the ranking, first at step 25
    assert [r[7] for r in params[:2]] == ["25.0", "25.0"] and [r[6] for r in params[:2]] == ["1.0", "1.0"]
    assert [r[1] for r in params[:2]] == ["nan", "inf"]  # 0.weight held a NaN, 2.bias an Inf
    largest = [float(r[1]) for r in params[2:]]
    assert largest == sorted(largest, reverse=True)
    events = page.tables["event-table"][1:]
    assert sorted((r[0], r[2], r[3]) for r in events) == [("25.0", "0.0", "1.0"), ("25.0", "1.0", "0.0")]


def test_report_shows_events_hooks_and_top_parameters(report):
    text = report.read_text(encoding="utf-8")
    assert "First at step 25, in 0.weight (1 NaN, 0 Inf), 2.bias (0 NaN, 1 Inf)" in text
    assert "scale:0.5" in text and "No backward hooks" not in text
    assert text.count('class="param"') == 3
    assert "NaN/Inf first at step 25" in text and "largest norms over the run" in text
    data = json.loads(re.search(r'id="gx-data">(.*?)</script>', text)[1])["curves"]["top_norms"]
    at = data["x"].index(25)
    norms = {s["label"]: s["y"] for s in data["series"]}
    assert norms["0.weight"][at] is None and norms["2.bias"][at] is None  # a gap: NaN / Inf there
    assert norms["0.weight"][at - 1] is not None and norms["0.weight"][at + 1] is not None
    assert "ranked by their largest norm over the run (NaN/Inf first)" in text
    assert "<th>largest norm (run)</th>" in text


def test_report_of_a_clean_run_says_so(tmp_path, run_cli):
    run = write_run(tmp_path / "clean", steps=3)
    code, out, err = run_cli("report", run, "--out", tmp_path / "r.html")
    assert code == 0, err
    text = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "No NaN or Inf in any recorded gradient" in text and "No backward hooks" in text
    assert "report of 3 steps x 4 parameters" in out


def test_report_bad_input_is_one_line(tmp_path, run_cli):
    code, _, err = run_cli("report", tmp_path, "--out", tmp_path / "r.html")
    assert code == 2 and "not a gradexplorer run directory" in err and err.count("\n") == 1
    run = write_run(tmp_path / "r", steps=2)
    code, _, err = run_cli("report", run, "--out", tmp_path / "missing" / "r.html")
    assert code == 2 and "does not exist" in err and err.count("\n") == 1


def chromium(*args: str) -> subprocess.CompletedProcess:
    profile = tempfile.mkdtemp(prefix="gx-chromium-")
    try:
        return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                               "--disable-background-networking", "--disable-component-update",
                               "--no-first-run", f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium installed (apt-get install chromium)")
def test_report_renders_in_headless_chromium(report, tmp_path):
    proc = chromium("--dump-dom", "--virtual-time-budget=5000", report.as_uri())
    dom = proc.stdout
    assert 'data-ready="1"' in dom, proc.stderr[-2000:]  # the page's script ran to its end
    page = Page(dom)
    assert set(SECTIONS) <= page.ids
    shot = tmp_path / "shot.png"
    chromium("--window-size=1200,1800", f"--screenshot={shot}", report.as_uri())
    pixels = shot.read_bytes()
    assert pixels[:8] == b"\x89PNG\r\n\x1a\n" and len(pixels) > 50_000  # drawn, not blank


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium installed (apt-get install chromium)")
def test_smoothing_in_the_browser_redraws_the_curves(report):
    def loss_path(dom):
        return re.search(r'data-key="loss".*?<path d="([^"]+)"', dom, re.S).group(1)

    plain = chromium("--dump-dom", "--virtual-time-budget=5000", report.as_uri()).stdout
    smooth = chromium("--dump-dom", "--virtual-time-budget=5000", report.as_uri() + "#smoothing=0.9").stdout
    assert 'id="smoothing-value">0.900<' in smooth
    a, b = loss_path(plain), loss_path(smooth)
    ya = np.array([float(v) for v in re.findall(r"[ML][\d.]+ ([\d.]+)", a)])
    yb = np.array([float(v) for v in re.findall(r"[ML][\d.]+ ([\d.]+)", b)])
    assert len(ya) and len(yb) and a != b
    assert np.ptp(yb) < np.ptp(ya)  # the smoothed loss swings less
    assert math.isfinite(float(yb[-1]))


def test_report_overlays_the_curves_of_more_runs(tmp_path, run_cli):
    import json

    runs = [write_run(tmp_path / f"lr{lr}", steps=steps, lr=lr)
            for lr, steps in ((0.1, 5), (0.05, 8), (0.2, 3))]
    out = tmp_path / "multi.html"
    code, text, err = run_cli("report", *runs, "--out", out)
    assert code == 0, err
    assert "2 more run(s) overlaid" in text
    html = out.read_text(encoding="utf-8")
    assert "3 runs on shared axes: lr0.1, lr0.05, lr0.2" in html
    data = json.loads(re.search(r'id="gx-data">(.*?)</script>', html, re.S).group(1))
    loss = data["curves"]["loss"]["series"]
    assert [s["label"] for s in loss] == ["lr0.1", "lr0.05", "lr0.2"]
    for series, run in zip(loss, runs, strict=True):
        rows = gx.open_run(run).step_rows()
        assert series["x"] == [r["step"] for r in rows] and series["y"] == [r["loss"] for r in rows]
    # one frame (shared axes) holds the three curves
    chart = re.search(r'data-key="loss".*?</svg>', html, re.S).group(0)
    assert chart.count("data-series=") == 3
    code, _, err = run_cli("report", runs[0], tmp_path / "nothing", "--out", tmp_path / "other.html")
    assert code == 2 and "not a gradexplorer run directory" in err


def test_a_nan_at_the_last_step_reads_nan_in_the_module_and_parameter_tables(tmp_path, run_cli):
    run_dir = write_run(tmp_path / "nan-last", steps=5, nan_at=5)  # 0.weight: a NaN, 2.bias: an Inf
    assert run_cli("report", run_dir, "--out", tmp_path / "r.html")[0] == 0
    page = Page((tmp_path / "r.html").read_text(encoding="utf-8"))
    modules = {r[0]: r for r in page.tables["module-table"][1:]}
    assert modules["(model)"][3:5] == ["nan", "nan"] and modules["0"][3:5] == ["nan", "nan"]
    assert modules["2"][3:5] == ["inf", "inf"]  # an Inf, no NaN
    fine = gx.open_run(run_dir).figures(5)
    assert math.isfinite(fine["0.weight"]["norm"])  # the finite part's norm, which is not shown
    params = {r[0]: r for r in page.tables["parameter-table"][1:]}
    assert params["0.weight"][1:4] == ["nan", "nan", "nan"] and params["2.bias"][1:4] == ["inf", "inf", "inf"]
    assert [r[0] for r in page.tables["parameter-table"][1:3]] == ["0.weight", "2.bias"]


def test_a_clipped_runs_norm_curve_is_the_accumulated_norm_with_the_applied_beside(tmp_path):
    """Clipped every step, the applied norm sits at max_norm whatever the gradient did: the
    report's global-norm curve is the norm as accumulated (the ledger's), the applied beside."""
    from tests.watched_loop import clipped_run

    clipped_run(tmp_path / "run", steps=5, max_norm=0.1)
    run = gx.open_run(tmp_path / "run")
    gx.write_report(run, tmp_path / "report.html")
    html = (tmp_path / "report.html").read_text()
    data = json.loads(re.search(r'id="gx-data">(.*?)</script>', html, re.S).group(1))
    series = {s["label"].rsplit(" · ", 1)[-1]: s["y"] for s in data["curves"]["global_norm"]["series"]}
    ledger = run.ledger()
    assert series["accumulated"] == [led.grad_norm_accumulated for led in ledger]
    assert series["applied"] == pytest.approx([led.grad_norm_applied for led in ledger], rel=1e-6)
    assert min(series["accumulated"]) > 1.0 > 0.1 * 1.01 > max(series["applied"])  # clipping acted
    assert "as accumulated (before clipping" in html
