"""The report's charts as inline SVG: curves, distribution bands and heat-map frames, with
axes and ticks; each chart carries its data range so the page's script can redraw a curve
(smoothing) in the same frame."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gradexplorer.core.messages.number_text import format_number
from gradexplorer.core.messages.printable import html_text
from gradexplorer.core.share.colours import RUN_COLOURS

BAND_FILLS = (("min", "max", 0.15), ("p5", "p95", 0.25), ("p25", "p75", 0.4))
FLAT = 1e-6  # a curve whose values differ by less than this (relative) is drawn flat


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values between ``lo`` and ``hi`` (about ``count`` of them)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    raw = (hi - lo) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


def log_ticks(lo: float, hi: float) -> list[float]:
    """Ticks of a log axis: powers of ten, or 1-2-5 steps when the range spans few decades."""
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    step = max(1, (b - a) // 5)
    ticks = [10.0**e for e in range(a, b + 1, step) if lo <= 10.0**e <= hi]
    if len(ticks) < 3:
        ticks = [m * 10.0**e for e in range(a, b + 1) for m in (1, 2, 5) if lo <= m * 10.0**e <= hi]
    if len(ticks) < 2:
        ticks = nice_ticks(lo, hi, 4)
    return ticks


@dataclass
class Frame:
    """A plot area: data range (``log``: y on a log10 scale) mapped to pixels."""

    x0: float
    x1: float
    y0: float
    y1: float
    width: int = 720
    height: int = 220
    log: bool = False
    left: int = 64
    right: int = 12
    top: int = 18
    bottom: int = 30

    def px(self, x: np.ndarray) -> np.ndarray:
        span = (self.x1 - self.x0) or 1.0
        return self.left + (np.asarray(x, dtype=np.float64) - self.x0) / span * (
            self.width - self.left - self.right)

    def py(self, y: np.ndarray) -> np.ndarray:
        y = np.asarray(y, dtype=np.float64)
        lo, hi = self.y0, self.y1
        if self.log:
            with np.errstate(divide="ignore", invalid="ignore"):
                y = np.log10(np.where(y > 0, y, np.nan))
            lo, hi = math.log10(lo), math.log10(hi)
        span = (hi - lo) or 1.0
        return self.top + (1 - (y - lo) / span) * (self.height - self.top - self.bottom)

    def attributes(self) -> str:
        """The frame for the page's script (``data-*`` on the ``<svg>``)."""
        return (f'data-x0="{self.x0!r}" data-x1="{self.x1!r}" data-y0="{self.y0!r}" '
                f'data-y1="{self.y1!r}" data-log="{int(self.log)}" data-box="{self.left} {self.top} '
                f'{self.width - self.left - self.right} {self.height - self.top - self.bottom}"')

    def axes(self, xlabel: str = "step", ylabel: str = "") -> str:
        w, h = self.width, self.height
        inner_b = h - self.bottom
        parts = [f'<rect x="{self.left}" y="{self.top}" width="{w - self.left - self.right}" '
                 f'height="{inner_b - self.top}" class="plot"/>']
        for t in nice_ticks(self.x0, self.x1, 6):
            x = float(self.px(t))
            parts.append(f'<line x1="{x:.1f}" y1="{inner_b}" x2="{x:.1f}" y2="{inner_b + 4}" class="tick"/>'
                         f'<text x="{x:.1f}" y="{inner_b + 16}" class="tl" text-anchor="middle">'
                         f'{format_number(t)}</text>')
        if self.log:
            yticks = log_ticks(self.y0, self.y1)
        else:
            yticks = nice_ticks(self.y0, self.y1, 4)
        for t, label in zip(yticks, tick_labels(yticks), strict=True):
            y = float(self.py(t))
            parts.append(f'<line x1="{self.left}" y1="{y:.1f}" x2="{w - self.right}" y2="{y:.1f}" '
                         f'class="grid"/><text x="{self.left - 4}" y="{y + 4:.1f}" class="tl" '
                         f'text-anchor="end">{label}</text>')
        parts.append(f'<text x="{w - self.right}" y="{h - 2}" class="al" text-anchor="end">'
                     f'{html_text(xlabel)}</text>')
        if ylabel:
            parts.append(f'<text x="{self.left}" y="{self.top - 5}" class="al">{html_text(ylabel)}</text>')
        return "".join(parts)


def y_range(values: Sequence[np.ndarray], log: bool) -> tuple[float, float, bool]:
    """The y range covering every finite value (positive ones on a log scale); log falls back
    to linear when nothing is positive."""
    v = np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a in values] or [np.zeros(0)])
    v = v[np.isfinite(v)]
    if log:
        pos = v[v > 0]
        if len(pos):
            lo, hi = float(pos.min()), float(pos.max())
            return (lo / 1.5, hi * 1.5, True) if hi > lo else (lo / 2, hi * 2, True)
    if not len(v):
        return 0.0, 1.0, False
    lo, hi = float(v.min()), float(v.max())
    if hi - lo <= FLAT * max(abs(lo), abs(hi)):  # flat but for float rounding: drawn flat
        mid = float(f"{(lo + hi) / 2:.6g}")  # centred on the round value the noise is about
        pad = abs(mid) * 0.1 or 1.0
        return mid - pad, mid + pad, False
    pad = (hi - lo) * 0.05
    return lo - pad, hi + pad, False


def tick_labels(ticks: Sequence[float]) -> list[str]:
    """``fmt`` of each tick, with more digits where 4 would write two ticks alike."""
    for digits in range(4, 17):
        labels = [f"{t:.{digits}g}" if math.isfinite(t) else str(t) for t in ticks]
        if len(set(labels)) == len(labels):
            return labels
    return labels


def path_data(frame: Frame, x: np.ndarray, y: np.ndarray) -> str:
    """An SVG path through the finite points, broken where a value is missing or NaN."""
    px, py = frame.px(x), frame.py(y)
    ok = np.isfinite(px) & np.isfinite(py)
    out, pen = [], "M"
    for a, b, good in zip(px.tolist(), py.tolist(), ok.tolist(), strict=True):
        if not good:
            pen = "M"
            continue
        out.append(f"{pen}{a:.1f} {b:.1f}")
        pen = "L"
    return "".join(out)


def marks(frame: Frame, steps: Sequence[int], label: str) -> str:
    """Red vertical lines at event steps (NaN/Inf), each with a tooltip."""
    xs = frame.px(np.asarray(steps, dtype=np.float64)).tolist() if len(steps) else []
    title = html_text(label)
    return "".join(
        f'<line x1="{x:.1f}" y1="{frame.top}" x2="{x:.1f}" y2="{frame.height - frame.bottom}" '
        f'class="event"><title>{title} at step {s}</title></line>' for s, x in zip(steps, xs, strict=True))


def line_chart(series: Sequence[tuple[str, np.ndarray, np.ndarray]], *, log: bool = False,
               ylabel: str = "", events: Sequence[int] = (), key: str = "", width: int = 720,
               height: int = 220) -> str:
    """Curves ``(label, x, y)`` in one frame; ``key`` names the page data a script redraws from."""
    xs = [np.asarray(x, dtype=np.float64) for _, x, _ in series if len(x)]
    x0 = min((float(x.min()) for x in xs), default=0.0)
    x1 = max((float(x.max()) for x in xs), default=1.0)
    y0, y1, log = y_range([y for _, _, y in series], log)
    frame = Frame(x0, x1 if x1 > x0 else x0 + 1, y0, y1, width, height, log)
    body = [frame.axes("step", ylabel), marks(frame, events, "NaN/Inf")]
    legend = []
    for i, (label, x, y) in enumerate(series):
        colour = RUN_COLOURS[i % len(RUN_COLOURS)]
        body.append(f'<path d="{path_data(frame, x, y)}" stroke="{colour}" class="curve" '
                    f'data-series="{i}"><title>{html_text(label)}</title></path>')
        legend.append(f'<span class="lg"><i style="background:{colour}"></i>{html_text(label)}</span>')
    data_key = f' data-key="{html_text(key)}"' if key else ""
    return (f'<div class="chart"><svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
            f'{frame.attributes()}{data_key} role="img">{"".join(body)}</svg>'
            f'<div class="legend">{"".join(legend)}</div></div>')


def band_chart(steps: np.ndarray, bands: dict[str, np.ndarray], *, events: Sequence[int] = (),
               width: int = 720, height: int = 180) -> str:
    """TensorBoard-style distribution: min–max, p5–p95, p25–p75 shaded, the median a line."""
    steps = np.asarray(steps, dtype=np.float64)
    y0, y1, _ = y_range([bands["min"], bands["max"]], False)
    frame = Frame(float(steps.min()), float(steps.max()) if steps.max() > steps.min() else steps.min() + 1,
                  y0, y1, width, height)
    body = [frame.axes("step", "gradient value")]
    ok = np.isfinite(bands["min"])
    xs = frame.px(steps[ok])
    for low, high, opacity in BAND_FILLS:
        top, bottom = frame.py(bands[high][ok]), frame.py(bands[low][ok])
        points = " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(xs, top, strict=True))
        points += " " + " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(xs[::-1], bottom[::-1], strict=True))
        body.append(f'<polygon points="{points}" fill="#1f77b4" fill-opacity="{opacity}">'
                    f'<title>{low}–{high}</title></polygon>')
    body.append(f'<path d="{path_data(frame, steps, bands["median"])}" stroke="#0b3c73" class="curve">'
                f'<title>median</title></path>')
    body.append(marks(frame, events, "NaN/Inf"))
    return (f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img">'
            f'{"".join(body)}</svg>')


def heatmap_chart(steps: np.ndarray, lo: float, hi: float, image_uri: str, *,
                  events: Sequence[int] = (), width: int = 720, height: int = 180) -> str:
    """A heat-map image (steps across, values up) in a frame with axes."""
    frame = Frame(float(steps.min()), float(steps.max()) if steps.max() > steps.min() else steps.min() + 1,
                  lo, hi, width, height)
    w, h = width - frame.left - frame.right, height - frame.top - frame.bottom
    return (f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img">'
            f'{frame.axes("step", "gradient value")}'
            f'<image x="{frame.left}" y="{frame.top}" width="{w}" height="{h}" '
            f'preserveAspectRatio="none" style="image-rendering:pixelated" href="{image_uri}"/>'
            f'{marks(frame, events, "NaN/Inf")}</svg>')
