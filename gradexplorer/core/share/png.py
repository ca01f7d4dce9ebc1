"""A tiny PNG encoder (zlib, no imaging library) and the report's heat-map images (in ``colours.VIRIDIS``)."""

from __future__ import annotations

import base64
import struct
import zlib

import numpy as np

from gradexplorer.core.share.colours import VIRIDIS


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_bytes(rgb: np.ndarray) -> bytes:
    """An 8-bit RGB PNG of ``rgb`` (H×W×3 uint8)."""
    rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
    height, width, _ = rgb.shape
    raw = np.concatenate([np.zeros((height, 1), np.uint8), rgb.reshape(height, width * 3)], axis=1)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header)
            + _chunk(b"IDAT", zlib.compress(raw.tobytes(), 6)) + _chunk(b"IEND", b""))


def heat_image(counts: np.ndarray) -> np.ndarray:
    """Columns of ``counts`` (values × steps, row 0 the lowest value) as colours, each column
    scaled to its own largest count on a log scale (the shape of every step shows); the image's
    top row is the highest value. Empty columns are dark grey."""
    counts = np.asarray(counts, dtype=np.float64)
    top = counts.max(axis=0, keepdims=True)
    level = np.where(top > 0, np.log1p(counts) / np.log1p(np.where(top > 0, top, 1.0)), 0.0)
    rgb = VIRIDIS[np.clip((level * 255).round().astype(np.int64), 0, 255)]
    rgb[:, (top[0] <= 0)] = (40, 40, 40)
    return rgb[::-1]


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")
