"""The report's spike section (the events ``gradexplorer spikes`` lists, linked from the
curves) and a never-clipped run's clip-coefficient chart drawn flat with readable ticks."""

from __future__ import annotations

import re

import pytest
import torch
from spike_helpers import sample_ids, train
from torch import nn

import gradexplorer as gx
from gradexplorer.core.diagnose.spikes import ids_text
from tests.test_report import Page

INJECT = 120


@pytest.fixture(scope="module")
def spiked_report(tmp_path_factory):
    from gradexplorer.cli import main

    folder = tmp_path_factory.mktemp("spiked")
    train(folder / "run", 160, inject=INJECT)
    assert main(["report", str(folder / "run"), "--out", str(folder / "r.html")]) == 0
    return folder / "run", (folder / "r.html").read_text(encoding="utf-8")


def test_report_lists_the_spike_events_linked_from_the_curves(spiked_report, run_cli):
    path, text = spiked_report
    events = gx.open_run(path).spike_events()
    assert [e.step for e in events] == [INJECT]
    rows = Page(text).tables["spike-table"][1:]
    assert [(r[0], r[1]) for r in rows] == [(repr(float(INJECT)), repr(float(events[0].until)))]
    first = events[0].ranking[0]
    assert first["name"] == "side.weight"
    assert rows[0][3].startswith(f"side.weight ({first['figure']}, step {INJECT}, ×")
    assert rows[0][4] == ids_text(sample_ids(INJECT))
    assert f'<tr id="spike-{INJECT}">' in text
    curves = text[text.index('<section id="curves">'):text.index('<section id="modules">')]
    assert f'<a href="#spike-{INJECT}">{INJECT}</a>' in curves
    # the same event and batch as the command line's list
    code, out, _ = run_cli("spikes", path)
    assert code == 0 and f"step {INJECT}:" in out and ids_text(sample_ids(INJECT)) in out


def test_a_run_without_spikes_says_so(tmp_path, run_cli):
    from tests.share_helpers import write_run

    run = write_run(tmp_path / "quiet", steps=3)
    assert run_cli("report", run, "--out", tmp_path / "q.html")[0] == 0
    assert "No spike event" in (tmp_path / "q.html").read_text(encoding="utf-8")


def test_a_never_clipped_runs_clip_coefficient_is_drawn_flat_with_readable_ticks(tmp_path, run_cli):
    """The applied gradient differs from the accumulated one by float rounding only (as after
    an unscale or a clip that does not bite): clip_coef wobbles by 1e-7 around 1."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gx.watch(model, opt, tmp_path / "run"):
        for step in range(1, 13):
            opt.zero_grad()
            x = torch.randn(16, 4, generator=torch.Generator().manual_seed(step))
            model(x).square().mean().backward()
            for p in model.parameters():
                p.grad.mul_(1 + (step % 3) * 1e-7)  # rounding, not clipping
            opt.step()
    run = gx.open_run(tmp_path / "run")
    coefs = [run.step_info(s)["clip_coef"] for s in run.steps]
    assert len(set(coefs)) > 1 and max(abs(c - 1) for c in coefs) < 1e-6
    assert not any(run.step_info(s)["clipped"] for s in run.steps)
    assert run_cli("report", tmp_path / "run", "--out", tmp_path / "c.html")[0] == 0
    text = (tmp_path / "c.html").read_text(encoding="utf-8")
    chart = text[text.index("<h3>clip_coef</h3>"):]
    chart = chart[:chart.index("</svg>")]
    y0, y1 = (float(v) for v in re.search(r'data-y0="([^"]+)" data-y1="([^"]+)"', chart).groups())
    assert y0 < 0.95 and y1 > 1.05  # a flat line in a readable range, not 1e-7 of noise blown up
    labels = re.findall(r'class="tl" text-anchor="end">([^<]+)<', chart)
    assert len(labels) >= 3 and len(set(labels)) == len(labels) and "1" in labels
    ys = {float(y) for y in re.findall(r"[ML][\d.]+ ([\d.]+)", re.search(r'<path d="([^"]+)"', chart)[1])}
    assert len(ys) == 1  # drawn flat
