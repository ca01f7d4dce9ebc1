"""``report RUN --out report.html``: one self-contained HTML file of a run (inline SVG, PNG,
CSS and script; nothing fetched at view time), readable in any browser.

Sections (each an element with the id given): ``summary``, ``curves`` (loss and global norm,
with TensorBoard's smoothing slider and CSV), ``modules`` (the ranked per-module table),
``parameters`` (the per-parameter table ranked by each one's largest norm over the run),
``top`` (norm curves, heat maps and distribution bands of the top parameters), ``spikes`` (the
spike events ``gradexplorer spikes`` lists: step, layer first to move, batch ids; each
``spike-STEP``, linked from the curves), ``events`` (NaN/Inf and where they started), ``hooks``,
``noise`` (the gradient noise scale and the lowest-SNR modules and parameters: report_noise.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from gradexplorer._version import __version__
from gradexplorer.core.diagnose.spikes import factor_text, ids_text
from gradexplorer.core.files.atomic_file import write_atomic
from gradexplorer.core.gc_pause import gc_paused
from gradexplorer.core.messages.number_text import format_number
from gradexplorer.core.messages.printable import html_text
from gradexplorer.core.runs.run import Run
from gradexplorer.core.runs.settings_text import cadence_text
from gradexplorer.core.share.png import data_uri, heat_image, png_bytes
from gradexplorer.core.share.report_data import ReportData, TopParameter, gather, rank_by_largest
from gradexplorer.core.share.report_noise import noise_section
from gradexplorer.core.share.report_page import page_assets
from gradexplorer.core.share.svg_charts import band_chart, heatmap_chart, line_chart
from gradexplorer.core.stats.bands import BAND_NAMES
from gradexplorer.core.stats.curves import downsample_peaks
from gradexplorer.core.stats.histogram import rebin_rows
from gradexplorer.core.stats.records import whole_figure

SECTIONS = ("summary", "curves", "noise", "modules", "parameters", "top", "spikes", "events", "hooks")
E = html_text


def _json_list(values) -> list:
    """``values`` as floats, None where a value is missing or not finite (JSON has no NaN)."""
    floats = np.array(values, dtype=np.float64)  # None: NaN
    out = floats.tolist()
    for i in np.flatnonzero(~np.isfinite(floats)).tolist():
        out[i] = None
    return out


def _cell(value, bad: bool = False) -> str:
    """A table cell whose sort key is the exact value."""
    if value is None:
        return '<td data-v="">–</td>'
    if isinstance(value, str):
        return f"<td>{E(value)}</td>"
    v = float(value)
    text = format_number(v) if isinstance(value, float) else str(value)
    return f'<td data-v="{v!r}"{" class=bad" if bad else ""}>{E(text)}</td>'


def _table(table_id: str, headers: list[str], rows: list[str]) -> str:
    head = "".join(f"<th>{E(h)}</th>" for h in headers)
    return (f'<div class="controls"><button data-table="{table_id}">CSV</button>'
            f'<span class="note">click a column to sort</span></div><div class="scroll">'
            f'<table id="{table_id}" class="sortable"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def summary_section(d: ReportData) -> str:
    s = d.settings
    rows = [("run", d.path), ("model", d.model),
            ("steps", f"{d.steps[0]}..{d.steps[-1]} ({len(d.steps):,} recorded)"),
            ("parameters", f"{len(d.parameters):,}"), ("recorded", f"{cadence_text(s)}, "
             f"{s.get('bins', '?')}-bin histograms, {s.get('ranks', 1)} rank(s) ({s.get('mode', 'single')})"),
            ("started", d.created), ("gradients", d.which)]
    alarm = (f'<p class="alarm">NaN/Inf in {d.event_count:,}{"" if d.events_complete else "+"} '
             f'parameter-steps, first at step '
             f'{d.events[0].step} — see <a href="#events">events</a></p>') if d.events else \
        '<p>No NaN or Inf in any recorded gradient.</p>'
    body = "".join(f"<tr><td><b>{E(k)}</b></td><td>{E(v)}</td></tr>" for k, v in rows)
    return f'<section id="summary"><h2>Run</h2><table class="kv">{body}</table>{alarm}</section>'


def step_series(d: ReportData, key: str) -> list[tuple[str, list[int], list[float | None]]]:
    """``(label, steps, values)`` of one step figure: the run's, then each overlaid run's. The
    global norm of a run that clips or scales is its headline (as accumulated), the run's own
    applied norm beside it."""
    def own(curves: dict) -> str:
        return "headline_norm" if key == "global_norm" and "headline_norm" in curves else key

    label = d.label or key.replace("_", " ")
    out = []
    if own(d.curves) in d.curves:
        if own(d.curves) != key:
            out += [(f"{label} · accumulated", d.steps, d.curves["headline_norm"]),
                    (f"{label} · applied", d.steps, d.curves[key])]
        else:
            out.append((label, d.steps, d.curves[key]))
    out += [(other, steps, curves[own(curves)]) for other, steps, curves in d.overlays
            if own(curves) in curves]
    return [s for s in out if any(v is not None for v in s[2])]


def curve_data(d: ReportData) -> dict:
    """The page's data: full-resolution step curves (each run's own steps when runs are
    overlaid), top parameters' norm curves (for smoothing and CSV)."""
    out = {}
    for key in ("loss", "global_norm"):
        series = step_series(d, key)
        if series:
            out[key] = {"x": d.steps, "series": [
                {"label": label, "y": _json_list(values), **({"x": steps} if d.overlays else {})}
                for label, steps, values in series]}
    if d.top:
        out["top_norms"] = {"x": d.top[0].norm_steps.tolist(), "series": [
            {"label": t.name, "y": _json_list(t.norm.tolist())} for t in d.top]}
    return out


def _drawn(steps, values) -> tuple[np.ndarray, np.ndarray]:
    y = np.array(values, dtype=np.float64)  # None: NaN
    return downsample_peaks(np.asarray(steps), y, 1600)


def _varies(values: list) -> bool:
    """More than one distinct value (None left out) in ``values``."""
    distinct = set(values)
    distinct.discard(None)
    return len(distinct) > 1


def curves_section(d: ReportData, data: dict) -> str:
    runs = (f" — {len(d.overlays) + 1} runs on shared axes: " + ", ".join(
        [d.label, *(label for label, _, _ in d.overlays)])) if d.overlays else ""
    parts = [f'<section id="curves"><h2>Curves{E(runs)}</h2><div class="controls"><label>smoothing '
             '<input id="smoothing" type="range" min="0" max="0.999" step="0.001" value="0"> '
             '<span id="smoothing-value">0.000</span></label><span class="note">TensorBoard\'s '
             'debiased exponential moving average; red dashes: steps with NaN/Inf</span></div>']
    norm_title = ("global gradient norm, as accumulated (before clipping and unscaled) and as applied"
                  if "headline_norm" in d.curves else "global gradient norm")
    for key, title, log in (("loss", "loss", False), ("global_norm", norm_title, True)):
        if key not in data:
            continue
        series = [(label, *_drawn(steps, values)) for label, steps, values in step_series(d, key)]
        parts.append(f"<h3>{E(title)} <button data-csv=\"{key}\">CSV</button></h3>")
        parts.append(line_chart(series, log=log, ylabel=title, events=d.event_steps, key=key))
    if d.spikes:
        parts.append('<p class="note">spike events at step ' + ", ".join(
            f'<a href="#spike-{e.step}">{e.step}</a>' for e in d.spikes) + ' — see <a href="#spikes">'
            'spikes</a> for the layer first to move and the batch</p>')
    others = [k for k, v in d.curves.items() if k not in ("loss", "global_norm", "headline_norm")
              and _varies(v)]
    for key in others:
        series = [(label, *_drawn(steps, values)) for label, steps, values in step_series(d, key)]
        parts.append(f"<h3>{E(key)}</h3>" + line_chart(series, ylabel=key, height=150))
    return "".join(parts) + "</section>"


def modules_section(d: ReportData) -> str:
    rows = []
    for m in d.modules:  # a module holding NaN/Inf: its norm and max |g| NaN/inf, as in the app
        nan = m.path in d.modules_nan
        inf = bool(m.nonfinite) and not nan
        rows.append(f"<tr><td>{E(m.path or '(model)')}</td>{_cell(m.params)}{_cell(m.with_grad)}"
                    f"{_cell(whole_figure('norm', m.norm, nan, inf), bool(m.nonfinite))}"
                    f"{_cell(whole_figure('abs_max', m.abs_max, nan, inf), bool(m.nonfinite))}"
                    f"{_cell(m.update_ratio)}{_cell(m.nonfinite, bool(m.nonfinite))}</tr>")
    return (f'<section id="modules"><h2>Modules at step {d.last_step}, ranked by gradient norm</h2>'
            '<p class="note">A module\'s norm is the L2 norm of all its parameters\' gradient '
            'elements together (NaN when one of them holds a NaN, inf when one holds ±Inf); update '
            'is the largest ‖Δθ‖/‖θ‖ of its parameters.</p>'
            + _table("module-table", ["module", "params", "with grad", "norm", "max |g|", "update",
                                      "NaN+Inf"], rows) + "</section>")


def parameters_section(d: ReportData) -> str:
    rows = []
    for name, s, bad in rank_by_largest(d.params, d.largest):
        norm, abs_max = d.largest.get(name, (None, None))
        rows.append(f"<tr><td>{E(name)}</td>{_cell(norm, bool(bad))}{_cell(abs_max, bool(bad))}"
                    f"{_cell(s.get('norm'))}{_cell(s.get('update_ratio'))}{_cell(s.get('zero_fraction'))}"
                    f"{_cell(bad.steps if bad else 0, bool(bad))}"
                    f"{_cell(bad.first if bad else None, bool(bad))}</tr>")
    last = d.last_step
    return ('<section id="parameters"><h2>Parameters, ranked by their largest norm over the run '
            '(NaN/Inf first)</h2><p class="note">largest norm and max |g|: over every recorded step '
            '(NaN or inf where a step\'s gradient held one); the next three columns: at step '
            f'{last}.</p>' + _table("parameter-table", [
                "parameter", "largest norm (run)", "largest max |g| (run)", f"norm at {last}",
                f"update at {last}", f"zeros at {last}", "NaN/Inf steps", "first NaN/Inf"], rows)
            + "</section>")


def spikes_section(d: ReportData) -> str:
    """The spike events, as ``gradexplorer spikes RUN`` lists them."""
    if not d.spikes:
        return ('<section id="spikes"><h2>Spikes</h2><p>No spike event: no loss or gradient figure '
                'left its band.</p></section>')
    rows = []
    for e in d.spikes:
        first = e.ranking[0] if e.ranking else None
        moved = (f"{first['name']} ({first['figure']}, step {first['onset']}, "
                 f"{factor_text(first['factor'])})") if first else "–"
        rows.append(f'<tr id="spike-{e.step}">{_cell(e.step)}{_cell(e.until)}'
                    f'<td class="t">{E("; ".join(e.reasons))}</td><td class="t">{E(moved)}</td>'
                    f'<td class="t">{E(ids_text(e.batch))}</td></tr>')
    return (f'<section id="spikes"><h2>Spikes ({len(d.spikes)})</h2><p class="note">The events '
            '<code>gradexplorer spikes RUN</code> lists: where a loss or gradient figure left its '
            'band, the parameter whose figure moved first (its peak as a multiple of its band\'s '
            'median) and the ids of the batch.</p>'
            + _table("spike-table", ["step", "until", "why", "first to move", "batch ids"], rows)
            + "</section>")


def heat_map(t: TopParameter, events: list[int]) -> str:
    """Histograms over the steps on one value axis: the typical p5..p95 range (medians over
    the steps) widened by its width each side; values beyond are left out of the picture (not
    of the bands, which show min and max)."""
    m = t.matrix
    lo = float(np.nanmedian(t.bands["p5"])) if len(m.steps) else 0.0
    hi = float(np.nanmedian(t.bands["p95"])) if len(m.steps) else 1.0
    pad = (hi - lo) or abs(hi) or 1.0
    grid = np.linspace(lo - pad, hi + pad, 65)
    image = heat_image(rebin_rows(m.edges, m.counts, grid).T)
    return heatmap_chart(m.steps, grid[0], grid[-1], data_uri(png_bytes(image)), events=events)


def top_section(d: ReportData, data: dict) -> str:
    parts = [f'<section id="top"><h2>Top {len(d.top)} parameters</h2>',
             '<p class="note">Norm curves (log scale, smoothed with the slider above), then for each '
             'parameter a heat map of its gradient histograms over the steps (each step scaled to its '
             'own peak, log colour; value axis: the typical p5–p95 range and as much again each '
             'side) and TensorBoard-style distribution bands from the exact histograms: '
             'min–max, p5–p95, p25–p75 shaded, the median a line (quantiles by linear interpolation '
             'inside a bin).</p>']
    if "top_norms" in data:
        series = [(t.name, t.norm_steps, t.norm) for t in d.top]
        parts.append('<h3>gradient norms <button data-csv="top_norms">CSV</button></h3>')
        parts.append(line_chart(series, log=True, ylabel="norm", events=d.event_steps, key="top_norms"))
    for t in d.top:
        shape = "×".join(str(s) for s in t.shape) or "?"
        parts.append(f'<div class="param"><h3>{E(t.name)} <span class="note">[{shape}] — {E(t.why)}'
                     f'</span></h3>')
        if len(t.matrix.steps):
            last = {n: t.bands[n][-1] for n in BAND_NAMES}
            parts.append(heat_map(t, d.event_steps))
            parts.append(band_chart(t.matrix.steps, t.bands, events=d.event_steps))
            parts.append('<p class="note">at step ' + str(int(t.matrix.steps[-1])) + ": "
                         + ", ".join(f"{n} {format_number(v)}" for n, v in last.items()) + "</p>")
        else:
            parts.append('<p class="note">no histogram recorded</p>')
        parts.append("</div>")
    return "".join(parts) + "</section>"


def events_section(d: ReportData) -> str:
    if not d.events:
        return (f'<section id="events"><h2>NaN / Inf</h2><p>None: every recorded gradient of '
                f'{len(d.parameters):,} parameters over {len(d.steps):,} steps was finite.</p></section>')
    first = d.events[0].step
    at_first = [e for e in d.events if e.step == first]
    names = ", ".join(f"{e.name} ({e.nan_count} NaN, {e.inf_count} Inf)" for e in at_first)
    origin = d.origins.get(first)
    where = (f"<p>Origin (from the snapshot of step {first}): <b>{E(origin)}</b></p>" if origin else
             "<p class=note>No snapshot of that step says which backward op made it; the op can be "
             "found with <code>gradexplorer graph --trace-grads</code> or the app's diagnosis.</p>")
    rows = [f'<tr>{_cell(e.step)}<td class="t">{E(e.name)}</td>{_cell(e.nan_count, bool(e.nan_count))}'
            f'{_cell(e.inf_count, bool(e.inf_count))}<td class="t">{E(d.origins.get(e.step, ""))}</td></tr>'
            for e in d.events[:500]]
    total = f"{d.event_count:,}" + ("" if d.events_complete else "+")
    more = f'<p class="note">showing the first 500 of {total}</p>' if d.event_count > 500 else ""
    return (f'<section id="events"><h2>NaN / Inf</h2><p class="alarm">First at step {first}, in '
            f'{E(names)}.</p>{where}' + _table("event-table", ["step", "parameter", "NaN", "Inf",
                                                               "origin"], rows) + more + "</section>")


def hooks_section(d: ReportData) -> str:
    if not d.hooks:
        return ('<section id="hooks"><h2>Hooks</h2><p>No backward hooks were attached in this run.</p>'
                '</section>')
    rows = "".join(f"<tr><td>{E(k)}</td><td>{E(str(v))}</td></tr>" for k, v in d.hooks.items())
    return (f'<section id="hooks"><h2>Hooks</h2><p class="note">Backward-hook actions attached for the '
            f'whole run (they change the gradients recorded here).</p><table class="kv"><thead><tr>'
            f'<th>module</th><th>action</th></tr></thead><tbody>{rows}</tbody></table></section>')


def report_html(d: ReportData) -> str:
    data = curve_data(d)
    style, script = page_assets()
    nav = "".join(f'<a href="#{s}">{s}</a>' for s in SECTIONS)
    body = (summary_section(d) + curves_section(d, data) + noise_section(d.noise) + modules_section(d)
            + parameters_section(d)
            + top_section(d, data) + spikes_section(d) + events_section(d) + hooks_section(d))
    # every "<" as \u003c: no markup (a name such as "<img …>", a "</script>") in the page raw
    payload = json.dumps({"curves": data}, separators=(",", ":")).replace("<", "\\u003c")
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" '
            f'content="width=device-width, initial-scale=1"><title>gradexplorer report: '
            f'{E(Path(d.path).name)}</title><style>{style}</style></head><body><header><h1>Gradient report: '
            f'{E(Path(d.path).name)}</h1><p>{E(d.model)} · steps {d.steps[0]}..{d.steps[-1]} · '
            f'gradexplorer {__version__}</p><nav>{nav}</nav></header><main>{body}</main>'
            f'<script type="application/json" id="gx-data">{payload}</script>'
            f'<script>{script}</script></body></html>')


def write_report(run: Run, out: str | Path, top: int = 6, others: list[Run] = (),
                 stage=None) -> int:
    """Write the report of ``run`` to ``out`` atomically (the step curves of ``others``
    overlaid on its own); returns its size in bytes. ``stage(text)``: as ``gather``'s."""
    with gc_paused():  # a whole run's rows and curves: no collector passes over them meanwhile
        data = gather(run, top, list(others), stage)
        if stage is not None:
            stage("drawing the page")
        text = report_html(data).encode("utf-8")
    write_atomic(Path(out), text)
    return len(text)
