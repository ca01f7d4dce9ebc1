"""The report's ``noise`` section: the gradient noise scale a run recorded (docs/noise.md) — the
smoothed B_simple with its ±1 standard-error band and each step's own estimate, the noisiest
modules and parameters by SNR at the last step that has one, and their smoothed SNR curves."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gradexplorer.core.messages.number_text import format_number
from gradexplorer.core.messages.printable import html_text as E
from gradexplorer.core.runs.noise_rows import (
    module_noise,
    noise_params,
    noise_rows,
    parts_text,
    snr_curve,
)
from gradexplorer.core.runs.settings_text import noise_cadence_text
from gradexplorer.core.share.svg_charts import line_chart
from gradexplorer.core.stats.curves import downsample_peaks

CURVES = 4  # the lowest-SNR parameters whose SNR curve is drawn
ROWS = 12  # modules and parameters listed


@dataclass
class NoiseData:
    """What the section draws (``rows`` empty: the run recorded no noise scale)."""

    rows: list[dict] = field(default_factory=list)
    last: int | None = None
    modules: dict = field(default_factory=dict)  # path -> NoiseFigures at ``last``
    params: dict = field(default_factory=dict)  # name -> stored figures at ``last``
    curves: dict = field(default_factory=dict)  # name -> (steps, smoothed SNR)
    cadence: str = ""  # watch(noise_every=) in words ("" at every recorded step)


def gather_noise(run) -> NoiseData:
    rows = noise_rows(run)
    if not rows:
        return NoiseData()
    last = rows[-1]
    params = noise_params(run, last["step"])
    lowest = sorted((n for n, p in params.items() if p["snr_ema"] is not None),
                    key=lambda n: params[n]["snr_ema"])[:CURVES]
    curves = {}
    for name in lowest:
        steps, _, smoothed = snr_curve(run, name)
        curves[name] = (steps, smoothed)
    return NoiseData(rows, last["step"], module_noise(params, last["parts"], last["batch_small"]),
                     params, curves, noise_cadence_text(run.settings))


def _series(label: str, steps, values) -> tuple[str, np.ndarray, np.ndarray]:
    y = np.array([np.nan if v is None else v for v in values], np.float64)
    x, y = downsample_peaks(np.asarray(steps), y, 1600)
    return label, x, y


def _n(value) -> str:
    return "–" if value is None else E(format_number(value, 4))


def noise_section(d: NoiseData) -> str:
    if not d.rows:
        return ('<section id="noise"><h2>Noise scale</h2><p>No step of several backwards '
                '(gradient accumulation) or of DDP ranks was recorded: no noise scale '
                '(docs/noise.md).</p></section>')
    steps = [r["step"] for r in d.rows]
    last = d.rows[-1]
    chart = line_chart([_series(label, steps, [r[key] for r in d.rows]) for label, key in (
        ("B_simple, smoothed", "b_simple_ema"), ("−1 s.e.", "b_simple_low"),
        ("+1 s.e.", "b_simple_high"), ("this step's estimate (where > 0)", "b_simple"))],
        log=True, ylabel="B_simple (samples)", height=200)
    modules = sorted(((m, f) for m, f in d.modules.items() if m and f.snr is not None),
                     key=lambda mf: mf[1].snr)[:ROWS]
    params = sorted(((n, p) for n, p in d.params.items() if p["snr"] is not None),
                    key=lambda np_: np_[1]["snr"])[:ROWS]
    table = "".join(f"<tr><td>{E(m)}</td><td>module</td><td>{_n(f.snr)}</td><td>{_n(f.b_simple)}"
                    f"</td><td>{_n(f.g_sq)}</td><td>{_n(f.trace)}</td></tr>" for m, f in modules)
    table += "".join(f"<tr><td>{E(n)}</td><td>parameter</td><td>{_n(p['snr'])}</td><td>"
                     f"{_n(p['trace'] / p['g_sq'] if p['g_sq'] else None)}</td><td>{_n(p['g_sq'])}</td>"
                     f"<td>{_n(p['trace'])}</td></tr>" for n, p in params)
    curves = line_chart([_series(name, *d.curves[name]) for name in d.curves], ylabel="SNR, smoothed",
                        height=170) if d.curves else ""
    return (f'<section id="noise"><h2>Noise scale ({len(d.rows)} steps of '
            f'{E(parts_text(last))})</h2><p class="note">B_simple = tr(Σ)/|G|²: '
            'the batch size above which a larger batch stops buying much progress a step '
            '(McCandlish et al. 2018). Smoothed: the ratio of exponential moving averages of tr(Σ) '
            'and |G|², with ±1 standard error; a step\'s own estimate is noisy and drawn only where '
            f'positive. At step {d.last}: B_simple {_n(last["b_simple_ema"])} smoothed (this step '
            f'{_n(last["b_simple"])}), batch {last["parts"] * last["batch_small"]}'
            f'{"; " + E(d.cadence) if d.cadence else ""}.</p>{chart}'
            f'<h3>Lowest SNR at step {d.last}</h3><p class="note">SNR = |G|²/(tr(Σ)/b): the squared '
            'true gradient against the noise of one micro-batch\'s gradient (b samples); ≤ 0: no '
            'signal measurable at this batch size.</p><table id="noise-table"><thead><tr><th>name'
            '</th><th>kind</th><th>SNR</th><th>B_simple</th><th>|G|²</th><th>tr(Σ)</th></tr></thead>'
            f'<tbody>{table}</tbody></table>{curves}</section>')
