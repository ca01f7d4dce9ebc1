"""A laid-out graph as a PNG image, rasterised with numpy and written with zlib.

No Qt, Graphviz or imaging library is needed. Small graphs are drawn at full size with
6×10 bitmap labels; big ones are scaled down to fit ``max_side`` and ``max_pixels`` and
drawn without text (an overview).
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Hashable, Mapping

import networkx as nx
import numpy as np

from gradexplorer.core.graph.export.bitmap_font import GLYPH_HEIGHT, text_mask
from gradexplorer.core.graph.geometry import Box, Point, canvas_size, edge_polylines, node_boxes
from gradexplorer.core.graph.style import KIND_FILL, KIND_STROKE

MAX_SIDE = 16384
MAX_PIXELS = 40_000_000
EDGE_COLOR = (110, 110, 110)
TEXT_COLOR = (20, 20, 20)


def _rgb(hex_color: str) -> tuple[int, int, int]:
    return tuple(int(hex_color[i:i + 2], 16) for i in (1, 3, 5))


def raster_scale(width: float, height: float, max_side: int = MAX_SIDE,
                 max_pixels: int = MAX_PIXELS) -> float:
    """1.0, or less so the image fits both limits."""
    return min(1.0, max_side / max(width, height, 1.0), math.sqrt(max_pixels / max(width * height, 1.0)))


def draw_segments(img: np.ndarray, segments: np.ndarray, color: tuple[int, int, int]) -> None:
    """Draw 1-pixel lines for rows ``(x0, y0, x1, y1)`` (pixel coordinates), vectorised."""
    if len(segments) == 0:
        return
    x0, y0, x1, y1 = segments.T
    steps = np.ceil(np.maximum(np.abs(x1 - x0), np.abs(y1 - y0))).astype(np.int64) + 1
    seg = np.repeat(np.arange(len(segments)), steps)
    first = np.cumsum(steps) - steps
    t = (np.arange(len(seg)) - first[seg]) / np.maximum(steps[seg] - 1, 1)
    xs = np.rint(x0[seg] + (x1 - x0)[seg] * t).astype(np.int64)
    ys = np.rint(y0[seg] + (y1 - y0)[seg] * t).astype(np.int64)
    inside = (xs >= 0) & (ys >= 0) & (xs < img.shape[1]) & (ys < img.shape[0])
    img[ys[inside], xs[inside]] = color


def _arrowhead(points: list[Point], size: float) -> list[tuple[float, float, float, float]]:
    (ax, ay), (bx, by) = points[-2], points[-1]
    length = math.hypot(bx - ax, by - ay)
    if length == 0:
        return []
    ux, uy = (bx - ax) / length, (by - ay) / length
    wings = []
    for side in (-1, 1):
        wx = bx - size * (ux * 0.9 - side * uy * 0.45)
        wy = by - size * (uy * 0.9 + side * ux * 0.45)
        wings.append((bx, by, wx, wy))
    return wings


def _draw_box(img: np.ndarray, box: Box, scale: float, labels: bool) -> None:
    x0, y0 = int(box.left * scale), int(box.top * scale)
    x1 = max(x0 + 1, int((box.left + box.width) * scale))
    y1 = max(y0 + 1, int((box.top + box.height) * scale))
    img[y0:y1, x0:x1] = _rgb(KIND_STROKE.get(box.kind, "#888888"))
    if x1 - x0 > 2 and y1 - y0 > 2:
        img[y0 + 1:y1 - 1, x0 + 1:x1 - 1] = _rgb(KIND_FILL.get(box.kind, "#eeeeee"))
    if labels:
        mask = text_mask(box.label)[:, : max(0, x1 - x0 - 4)]
        tx = int(box.cx * scale) - mask.shape[1] // 2
        ty = int(box.cy * scale) - GLYPH_HEIGHT // 2 + 1
        region = img[ty:ty + mask.shape[0], tx:tx + mask.shape[1]]
        region[mask[: region.shape[0], : region.shape[1]]] = TEXT_COLOR


def render_png(G: nx.DiGraph, pos: Mapping[Hashable, Point],
               edge_points: Mapping[tuple, list[Point]] | None = None,
               max_side: int = MAX_SIDE, max_pixels: int = MAX_PIXELS) -> bytes:
    """PNG bytes of the drawing (labels only when drawn at full size)."""
    boxes = node_boxes(G, pos)
    width, height = canvas_size(boxes)
    scale = raster_scale(width, height, max_side, max_pixels)
    img = np.full((max(1, int(height * scale) + 1), max(1, int(width * scale) + 1), 3), 255, np.uint8)
    segments = []
    for _, points in edge_polylines(G, boxes, pos, edge_points):
        segments.extend((a[0], a[1], b[0], b[1]) for a, b in zip(points, points[1:], strict=False))
        segments.extend(_arrowhead(points, 7.0))
    draw_segments(img, np.asarray(segments, dtype=np.float64).reshape(-1, 4) * scale, EDGE_COLOR)
    for box in boxes.values():
        _draw_box(img, box, scale, labels=scale >= 1.0)
    return encode_png(img)


def encode_png(img: np.ndarray) -> bytes:
    """An RGB ``uint8`` array (height × width × 3) as PNG bytes."""
    h, w, _ = img.shape
    raw = np.zeros((h, 1 + 3 * w), dtype=np.uint8)  # filter byte 0 (none) on every row
    raw[:, 1:] = img.reshape(h, 3 * w)

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw.tobytes(), 6)) + chunk(b"IEND", b""))
