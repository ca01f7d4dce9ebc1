"""A histogram as a run database stores it, and back, bit for bit (format 3, ``schema.LEAN``).

``edges``: equal-width edges — edge k is ``k * ((hi - lo) / bins) + lo``, the last exactly
``hi``: ``np.linspace``'s arithmetic, which ``stats.histogram.histogram_edges`` follows — are
stored as ``(lo, hi)``, two little-endian float64 (16 bytes); any other edges (the fallback
ranges of ``histogram_edges``, a histogram made elsewhere) as every edge in float64
(``8 * (bins + 1)`` bytes). The writer keeps the pair only where rebuilding gives back every
edge, bit for bit. With one bin both forms are the 16 bytes ``lo, hi``.

``counts``: each count as an unsigned LEB128 varint (seven bits a byte, the lowest first, the
high bit set on every byte of a count but its last): a count below 128 takes one byte, below
16,384 two, any count of an int64 at most nine; ``bins`` is the number of bytes below 0x80.
Measured on the gradients of an MLP, GPT-2 tiny and ResNet-18 (946 histograms of 64 bins):
73 bytes a histogram on average, against 512 as int64, 90 in the narrowest whole dtype, 75 for
zlib of that, 64 for the smaller of the varints and zlib of them (``bench/run_size.py``).

Runs of formats 1 and 2 hold float64 edges and int64 counts (``validate.histogram_arrays``);
``decode`` and ``decode_block`` read either, every value checked: a damaged row is one line.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from gradexplorer.core.errors import UserError
from gradexplorer.core.recorder import schema as S
from gradexplorer.core.recorder import validate as V
from gradexplorer.core.snapshot.schema import MAX_BINS

BOUNDS = 16  # bytes of a stored (lo, hi)
MAX_BYTES = 9  # bytes of the largest count's varint (63 bits)


def equal_width(lo: np.ndarray, hi: np.ndarray, bins: int) -> np.ndarray:
    """``(rows, bins + 1)`` equal-width edges from each row's ``lo`` and ``hi`` (float64)."""
    lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        edges = np.arange(bins + 1, dtype=np.float64) * ((hi - lo) / bins)[:, None] + lo[:, None]
    edges[:, -1] = hi
    return edges


def varints(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(bytes, lengths)``: every value (not negative, < 2**63) as LEB128, one after another,
    and each value's byte count."""
    v = np.ascontiguousarray(values, np.int64).ravel().view(np.uint64)
    lengths = np.ones(v.size, np.int64)
    rest = v >> np.uint64(7)
    while rest.any():
        lengths += rest > 0
        rest >>= np.uint64(7)
    out = np.empty(int(lengths.sum()), np.uint8)
    starts = np.cumsum(lengths) - lengths
    for k in range(int(lengths.max(initial=1))):
        at = lengths > k
        byte = (v[at] >> np.uint64(7 * k)) & np.uint64(127)
        out[starts[at] + k] = byte | ((lengths[at] > k + 1).astype(np.uint64) << np.uint64(7))
    return out, lengths


def encode_rows(edges: np.ndarray, counts: np.ndarray) -> list[tuple[bytes, bytes]]:
    """``(edges blob, counts blob)`` of each row of ``edges`` (rows × bins+1, float64) and
    ``counts`` (rows × bins, whole numbers not negative)."""
    edges = np.ascontiguousarray(edges, np.float64)
    counts = np.ascontiguousarray(counts, np.int64)
    rows, bins = counts.shape
    if edges.shape != (rows, bins + 1) or (counts < 0).any():
        raise ValueError(f"histograms of {bins} bins need {bins + 1} edges and counts of 0 or more")
    bounds = np.ascontiguousarray(edges[:, [0, -1]])
    same = (equal_width(bounds[:, 0], bounds[:, 1], bins).view(np.int64)
            == edges.view(np.int64)).all(1)  # bit for bit (−0.0 and 0.0 apart)
    data, lengths = varints(counts)
    ends = np.cumsum(lengths.reshape(rows, bins).sum(1))
    blob = data.tobytes()
    return [(bounds[i].tobytes() if same[i] else edges[i].tobytes(),
             blob[ends[i - 1] if i else 0:ends[i]]) for i in range(rows)]


def encode(edges: np.ndarray, counts: np.ndarray) -> tuple[bytes, bytes]:
    """``encode_rows`` of one histogram."""
    return encode_rows(np.asarray(edges)[None, :], np.asarray(counts)[None, :])[0]


def _values(buf: np.ndarray) -> np.ndarray | None:
    """The counts of concatenated varints (whole ones), or None where a count would take more
    than ``MAX_BYTES`` bytes."""
    ends = buf < 128
    starts = np.flatnonzero(np.r_[True, ends[:-1]])
    position = np.arange(buf.size) - np.repeat(starts, np.diff(np.r_[starts, buf.size]))
    if position.size and position.max() >= MAX_BYTES:
        return None
    parts = (buf & 127).astype(np.uint64) << (7 * position).astype(np.uint64)
    return np.add.reduceat(parts, starts).view(np.int64) if buf.size else np.zeros(0, np.int64)


def _edges(blob: bytes, bins: int) -> np.ndarray | None:
    """A row's edges from its blob (None: neither form for ``bins``)."""
    if len(blob) == 8 * (bins + 1):
        return np.frombuffer(blob, "<f8").astype(np.float64)
    if len(blob) == BOUNDS:
        lo, hi = np.frombuffer(blob, "<f8").astype(np.float64)
        return equal_width(np.array([lo]), np.array([hi]), bins)[0]
    return None


def _in_order(e: np.ndarray) -> bool:
    """Finite ends, no decrease (a NaN fails ``>=``): every edge finite and in order."""
    return bool(math.isfinite(e[..., 0].min()) and math.isfinite(e[..., -1].max())
                and (e[..., 1:] >= e[..., :-1]).all()) if e.size else True


def decode(edges: object, counts: object, extras: tuple, version: int,
           where: str | Callable[[], str]) -> tuple:
    """``(edges float64, counts int64, nan, inf, below, above)`` of a ``histograms`` row of a
    run of format ``version``, every value checked (a one-line UserError naming the column)."""
    if version < S.LEAN:
        return V.histogram_arrays(edges, counts, extras, where)
    for column, blob in (("edges", edges), ("counts", counts)):
        if type(blob) is not bytes:  # noqa: E721
            raise UserError(f"{V._at(where)}, column {column} holds {type(blob).__name__}, not a blob")
    buf = np.frombuffer(counts, np.uint8)
    c = _values(buf) if buf.size and buf[-1] < 128 else None
    if c is None:
        raise UserError(f"{V._at(where)}, column counts is {len(counts)} bytes, not whole counts "
                        f"(varints of at most {MAX_BYTES} bytes)")
    e = _edges(edges, c.size) if 1 <= c.size <= MAX_BINS else None
    if e is None:
        raise UserError(f"{V._at(where)}: {len(edges)} bytes of edges for {c.size} counts ((lo, hi) "
                        f"or one more edge than counts, 1..{MAX_BINS} counts)")
    if not _in_order(e):
        raise UserError(f"{V._at(where)}, column edges holds edges that are not finite and increasing")
    if not all(V.is_count(v) for v in extras):
        for n, v in zip(("nan_count", "inf_count", "below", "above"), extras, strict=True):
            V.count(v, f"{V._at(where)}, column {n}")
    return (e, c, *(v or 0 for v in extras))


def decode_block(rows: Sequence[tuple], version: int, key: type = str) -> list[tuple] | None:
    """``(key, edges, counts, nan, inf, below, above)`` of many ``(key, edges, counts, nan, inf,
    below, above)`` rows — a step's (``key``: the parameter's name, text) or a parameter's over
    steps (``key=int``: the step) — decoded and checked at once (numpy) when all hold the same
    bin count, as a run writes them; None when any row needs ``decode`` one by one (the check
    that names what is wrong)."""
    if version < S.LEAN:
        return V.histogram_block(list(rows)) if key is str else None
    if not rows or any(type(r[0]) is not key or type(r[1]) is not bytes  # noqa: E721
                       or type(r[2]) is not bytes  # noqa: E721
                       or not r[2] or not all(map(V.is_count, r[3:])) for r in rows):
        return None
    buf = np.frombuffer(b"".join(r[2] for r in rows), np.uint8)
    ends = np.cumsum([len(r[2]) for r in rows]) - 1
    if (buf[ends] >= 128).any():
        return None
    values = _values(buf)
    per_row = np.diff(np.r_[0, np.cumsum(buf < 128)[ends]])
    bins = int(per_row[0])
    if values is None or (per_row != bins).any() or not 1 <= bins <= MAX_BINS:
        return None
    counts = values.reshape(len(rows), bins)
    edges = np.empty((len(rows), bins + 1))
    whole = [i for i, r in enumerate(rows) if len(r[1]) == 8 * (bins + 1)]  # one bin: (lo, hi)
    pairs = [i for i, r in enumerate(rows) if len(r[1]) == BOUNDS and bins > 1]
    if len(pairs) + len(whole) != len(rows):
        return None
    if pairs:
        bounds = np.frombuffer(b"".join(rows[i][1] for i in pairs), "<f8").reshape(-1, 2)
        edges[pairs] = equal_width(bounds[:, 0], bounds[:, 1], bins)
    if whole:
        edges[whole] = np.frombuffer(b"".join(rows[i][1] for i in whole), "<f8").reshape(-1, bins + 1)
    if not _in_order(edges):
        return None
    return [(r[0], edges[i], counts[i], *(v or 0 for v in r[3:])) for i, r in enumerate(rows)]
