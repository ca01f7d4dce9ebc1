"""A histogram as a run database stores it, and back, bit for bit (format 3, ``schema.LEAN``).

``edges``: equal-width edges — edge k is ``k * ((hi - lo) / bins) + lo``, the last exactly
``hi``: ``np.linspace``'s arithmetic, which ``stats.histogram.histogram_edges`` follows — are
stored as ``(lo, hi)``, two little-endian float64 (16 bytes); any other edges (the fallback
ranges of ``histogram_edges``, a histogram made elsewhere) as every edge in float64
(``8 * (bins + 1)`` bytes). The writer keeps the pair only where rebuilding gives back every
edge, bit for bit. With one bin both forms are the 16 bytes ``lo, hi``.

``counts``: one byte, the width ``w`` of the narrowest whole type holding every count (1, 2 or
4: unsigned; 8: int64), then each count in it, little-endian (``1 + w * bins`` bytes).
Measured on the gradients of an MLP, GPT-2 tiny and ResNet-18 (946 histograms of 64 bins, mean
bytes a histogram): 512 as int64, 90 so, 75 for zlib of that, 73 as LEB128 varints, 64 for
the smaller of the varints and zlib of them. The narrow type is read by one ``frombuffer``
(a whole step: one per width), where varints took four times the CPU of version 2's blobs to
decode, and its few more bytes are 5% of a run (``bench/run_size.py``).

Runs of formats 1 and 2 hold float64 edges and int64 counts (``validate.histogram_arrays``);
``decode`` and ``decode_block`` read either, every value checked: a damaged row is one line.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence

import numpy as np

from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.runs import schema as S
from gradexplorer.core.runs import validate as V
from gradexplorer.core.snapshot.schema import MAX_BINS, MAX_COUNT

BOUNDS = 16  # bytes of a stored (lo, hi)
WIDTHS = {1: "<u1", 2: "<u2", 4: "<u4", 8: "<i8"}  # a counts blob's first byte: its type


def equal_width(lo: np.ndarray, hi: np.ndarray, bins: int, out: np.ndarray | None = None) -> np.ndarray:
    """``(rows, bins + 1)`` equal-width edges from each row's ``lo`` and ``hi`` (float64), into
    ``out`` when given."""
    lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    if out is None:
        out = np.empty((len(lo), bins + 1))
    with np.errstate(over="ignore", invalid="ignore"):
        np.multiply(np.arange(bins + 1, dtype=np.float64), ((hi - lo) / bins)[:, None], out=out)
        out += lo[:, None]
    out[:, -1] = hi
    return out


def width(counts: np.ndarray) -> np.ndarray:
    """Each row's narrowest width (``WIDTHS``) for its counts (not negative)."""
    top = np.asarray(counts).max(axis=-1, initial=0)
    return _WIDTH_OF[np.searchsorted(_WIDTH_TOPS, top)]


_WIDTH_TOPS = np.array([2**8 - 1, 2**16 - 1, 2**32 - 1], np.int64)  # the largest count of each
_WIDTH_OF = np.array([1, 2, 4, 8])


def encode_columns(edges: np.ndarray, counts: np.ndarray) -> tuple[list[bytes], list[bytes]]:
    """The edges blobs and the counts blobs of the rows of ``edges`` (rows × bins+1, float64)
    and ``counts`` (rows × bins, whole numbers not negative), every row's at once: a handful
    of numpy calls and one ``tobytes`` a width, sliced (a step's histograms on the writer
    thread)."""
    edges = np.ascontiguousarray(edges, np.float64)
    counts = np.ascontiguousarray(counts, np.int64)
    rows, bins = counts.shape
    if edges.shape != (rows, bins + 1) or (rows and counts.min() < 0):
        raise ValueError(f"histograms of {bins} bins need {bins + 1} edges and counts of 0 or more")
    if not rows:
        return [], []
    bounds = np.ascontiguousarray(edges[:, [0, -1]])
    same = (equal_width(bounds[:, 0], bounds[:, 1], bins).view(np.int64)
            == edges.view(np.int64)).all(1)  # bit for bit (−0.0 and 0.0 apart)
    pairs = bounds.tobytes()
    if same.all():
        edge_blobs = [pairs[16 * i:16 * i + 16] for i in range(rows)]
    else:
        whole, size = edges.tobytes(), 8 * (bins + 1)
        edge_blobs = [pairs[16 * i:16 * i + 16] if s else whole[size * i:size * (i + 1)]
                      for i, s in enumerate(same.tolist())]
    widths = width(counts)
    blobs = [b""] * rows
    for w in np.unique(widths).tolist():
        at = np.flatnonzero(widths == w)
        block = np.empty((len(at), 1 + w * bins), np.uint8)  # the width byte, then the counts
        block[:, 0] = w
        block[:, 1:] = counts[at].astype(WIDTHS[w]).view(np.uint8)
        data, size = block.tobytes(), 1 + w * bins
        for j, i in enumerate(at.tolist()):
            blobs[i] = data[j * size:(j + 1) * size]
    return edge_blobs, blobs


def encode_rows(edges: np.ndarray, counts: np.ndarray) -> list[tuple[bytes, bytes]]:
    """``(edges blob, counts blob)`` of each row of ``edges`` (rows × bins+1, float64) and
    ``counts`` (rows × bins, whole numbers not negative)."""
    return list(zip(*encode_columns(edges, counts), strict=True))


def encode(edges: np.ndarray, counts: np.ndarray) -> tuple[bytes, bytes]:
    """``encode_rows`` of one histogram."""
    return encode_rows(np.asarray(edges)[None, :], np.asarray(counts)[None, :])[0]


def _counts(blob: bytes) -> np.ndarray | None:
    """A counts blob's counts (int64), or None where it is not one (a width ``WIDTHS`` knows,
    whole counts after it, none negative)."""
    w = blob[0] if blob else 0
    if w not in WIDTHS or (len(blob) - 1) % w:
        return None
    c = np.frombuffer(blob, WIDTHS[w], offset=1).astype(np.int64)
    return None if w == 8 and c.size and c.min() < 0 else c


def _edges(blob: bytes, bins: int) -> np.ndarray | None:
    """A row's edges from its blob (None: neither form for ``bins``; NaN where ``lo``, ``hi``
    or the width is not finite)."""
    if len(blob) == 8 * (bins + 1):
        return np.frombuffer(blob, "<f8").astype(np.float64)
    if len(blob) != BOUNDS:
        return None
    lo, hi = struct.unpack("<2d", blob)
    step = (hi - lo) / bins  # float64 arithmetic, as ``equal_width``'s
    if not (math.isfinite(step) and math.isfinite(lo) and math.isfinite(hi)):
        return np.full(bins + 1, math.nan)
    if max(abs(lo), abs(hi)) > 2.0**1000:  # an edge may round past the largest float
        return equal_width(np.array([lo]), np.array([hi]), bins)[0]
    edges = np.arange(bins + 1, dtype=np.float64) * step + lo
    edges[-1] = hi
    return edges


def _in_order(e: np.ndarray) -> bool:
    """Finite ends, no decrease (a NaN fails ``>=``): every edge finite and in order."""
    if e.ndim == 1:
        return bool(math.isfinite(e[0]) and math.isfinite(e[-1]) and (e[1:] >= e[:-1]).all())
    return bool(math.isfinite(e[:, 0].min()) and math.isfinite(e[:, -1].max())
                and (e[:, 1:] >= e[:, :-1]).all()) if e.size else True


def decode(edges: object, counts: object, extras: tuple, version: int,
           where: str | Callable[[], str]) -> tuple:
    """``(edges float64, counts int64, nan, inf, below, above)`` of a ``histograms`` row of a
    run of format ``version``, every value checked (a one-line UserError naming the column)."""
    if version < S.LEAN:
        return V.histogram_arrays(edges, counts, extras, where)
    for column, blob in (("edges", edges), ("counts", counts)):
        if type(blob) is not bytes:  # noqa: E721
            raise UserError(f"{V._at(where)}, column {column} holds {type(blob).__name__}, not a blob")
    c = _counts(counts)
    if c is None:
        raise UserError(f"{V._at(where)}, column counts is {len(counts)} bytes, not counts (a "
                        "width of 1, 2, 4 or 8 bytes, then whole counts, none negative)")
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
    if not rows or any(type(r[0]) is not key for r in rows):  # noqa: E721
        return None
    arrays = decode_arrays(rows, 1)
    if arrays is None:
        return None
    edges, counts, _ = arrays
    return [(r[0], e, c, *r[3:]) for r, e, c in zip(rows, edges, counts, strict=True)]


def decode_arrays(rows: Sequence[tuple], at: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(edges (n, bins + 1) float64, counts (n, bins) int64, extras (n, 4) int64)`` of a lean
    run's rows whose columns from ``at`` on are ``(edges, counts, nan, inf, below, above)``,
    decoded and checked at once when all hold the same bin count (``decode_block``); None
    otherwise."""
    if not rows:
        return None
    columns = list(zip(*rows, strict=True))
    return decode_columns(columns[at], columns[at + 1], columns[at + 2:at + 6])


def decode_columns(edge_blobs: Sequence, count_blobs: Sequence, extras: Sequence[Sequence]
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``decode_arrays`` of rows given as columns (``extras``: the nan, inf, below and above
    columns), every check made a column at a time at C speed (a run's rows as it writes them:
    one width, one bin count, (lo, hi) edges: a few joins and ``frombuffer``)."""
    n = len(count_blobs)
    if not n or set(map(type, edge_blobs)) != {bytes} or set(map(type, count_blobs)) != {bytes} \
            or len(extras) != 4 or any(set(map(type, column)) != {int} for column in extras):
        return None
    try:
        more = np.array(extras, np.int64).T
    except OverflowError:
        return None
    if more.min() < 0 or more.max() > MAX_COUNT:
        return None
    sizes = set(map(len, count_blobs))
    if 0 in sizes:
        return None
    counts = _count_columns(count_blobs, sizes, n)
    if counts is None:
        return None
    bins = counts.shape[1]
    edges = np.empty((n, bins + 1))
    edge_sizes = set(map(len, edge_blobs))
    if edge_sizes == {BOUNDS} and bins > 1:  # as a run writes them: (lo, hi) of equal-width bins
        bounds = np.frombuffer(b"".join(edge_blobs), "<f8").reshape(-1, 2)
        equal_width(bounds[:, 0], bounds[:, 1], bins, out=edges)
    else:
        whole = [i for i, b in enumerate(edge_blobs) if len(b) == 8 * (bins + 1)]  # one bin: (lo, hi)
        pairs = [i for i, b in enumerate(edge_blobs) if len(b) == BOUNDS and bins > 1]
        if len(pairs) + len(whole) != n:
            return None
        if pairs:
            bounds = np.frombuffer(b"".join(edge_blobs[i] for i in pairs), "<f8").reshape(-1, 2)
            edges[pairs] = equal_width(bounds[:, 0], bounds[:, 1], bins)
        if whole:
            edges[whole] = np.frombuffer(b"".join(edge_blobs[i] for i in whole), "<f8").reshape(-1, bins + 1)
    if not _in_order(edges):
        return None
    return edges, counts, more


def _count_columns(blobs: Sequence[bytes], sizes: set[int], n: int) -> np.ndarray | None:
    """The (n, bins) int64 counts of counts blobs (each: its width byte, then its counts), all
    of one bin count; None where any is not so (or a count of width 8 is negative)."""
    if len(sizes) == 1:  # one width (as a step's or a block's histograms mostly are)
        size = sizes.pop()
        data = np.frombuffer(b"".join(blobs), np.uint8).reshape(n, size)
        widths = np.unique(data[:, 0]).tolist()
        if len(widths) != 1 or widths[0] not in WIDTHS or (size - 1) % widths[0]:
            return None
        counts = np.ascontiguousarray(data[:, 1:]).view(WIDTHS[widths[0]]).astype(np.int64)
    else:
        widths = [b[0] for b in blobs]
        bins = (len(blobs[0]) - 1) // max(1, widths[0])
        if not 1 <= bins <= MAX_BINS or any(w not in WIDTHS or len(b) != 1 + w * bins
                                            for w, b in zip(widths, blobs, strict=True)):
            return None
        counts = np.empty((n, bins), np.int64)
        for w in set(widths):
            picked = [i for i, v in enumerate(widths) if v == w]
            data = np.frombuffer(b"".join([blobs[i] for i in picked]), np.uint8).reshape(len(picked), -1)
            counts[picked] = np.ascontiguousarray(data[:, 1:]).view(WIDTHS[w])
    if not 1 <= counts.shape[1] <= MAX_BINS or (counts.size and counts.min() < 0):
        return None
    return counts
