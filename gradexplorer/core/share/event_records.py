"""TensorBoard event records written directly: the ``Event`` protos' bytes and their TFRecord
frames, without building protobuf objects or TensorBoard's pure-Python CRC.

The bytes are what ``event_pb2.Event(...).SerializeToString()`` gives for the same fields
(fields in number order, zero scalars left out as proto3 does, repeated doubles packed;
``tests/test_event_records.py`` compares them byte for byte), framed as TensorBoard's
``RecordWriter`` frames them: length, masked CRC-32C of the length, data, masked CRC-32C of
the data. The CRC is a Numba loop (TensorBoard's own is Python, ~0.1 µs a byte: most of what a
histogram cost to write).

Field numbers (tensorboard/compat/proto): Event wall_time 1, step 2, file_version 3, summary 5;
Summary value 1; Summary.Value tag 1, simple_value 2, histo 5; HistogramProto min 1, max 2,
num 3, sum 4, sum_squares 5, bucket_limit 6, bucket 7.
"""

from __future__ import annotations

import struct

import numpy as np
from numba import njit


def _crc_tables() -> np.ndarray:
    """CRC-32C (Castagnoli, reflected) lookup tables for slicing by 8 bytes."""
    tables = np.zeros((8, 256), np.uint32)
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        tables[0, i] = crc
    for t in range(1, 8):
        tables[t] = (tables[t - 1] >> 8) ^ tables[0][tables[t - 1] & 0xFF]
    return tables


_TABLES = _crc_tables()


def masked_crc32c(data: bytes) -> int:
    """TensorBoard's ``masked_crc32c`` of ``data``."""
    heads, tails = np.empty((1, 12), np.uint8), np.empty((1, 4), np.uint8)
    _frame_ends(np.frombuffer(data, np.uint8), np.array([len(data)], np.int64), _TABLES, heads, tails)
    return int.from_bytes(tails[0].tobytes(), "little")


@njit(nogil=True, cache=True)
def _frame_ends(data, sizes, tables, heads, tails):
    """Of each record laid end to end in ``data`` (``sizes``: each one's length), its frame's
    beginning into ``heads[i]`` (its length, 8 bytes, and their masked CRC-32C) and its end
    into ``tails[i]`` (the record's masked CRC-32C), little-endian. CRC-32C (Castagnoli,
    reflected), eight bytes a round (slicing by 8), masked as TensorBoard masks it; one kernel
    (one compilation, cached), the CRC written out rather than called."""
    at = 0
    for i in range(sizes.size):
        n = sizes[i]
        crc = np.uint32(0xFFFFFFFF)
        for j in range(8):
            heads[i, j] = (n >> (8 * j)) & 0xFF
            crc = tables[0, (crc ^ np.uint32(heads[i, j])) & np.uint32(0xFF)] ^ (crc >> np.uint32(8))
        for k in range(2):
            if k == 1:  # the record's own CRC
                crc = np.uint32(0xFFFFFFFF)
                p, stop = at, at + n
                while p + 8 <= stop:
                    low = crc ^ (np.uint32(data[p]) | np.uint32(data[p + 1]) << np.uint32(8)
                                 | np.uint32(data[p + 2]) << np.uint32(16)
                                 | np.uint32(data[p + 3]) << np.uint32(24))
                    crc = (tables[7, low & np.uint32(0xFF)]
                           ^ tables[6, (low >> np.uint32(8)) & np.uint32(0xFF)]
                           ^ tables[5, (low >> np.uint32(16)) & np.uint32(0xFF)]
                           ^ tables[4, low >> np.uint32(24)]
                           ^ tables[3, data[p + 4]] ^ tables[2, data[p + 5]] ^ tables[1, data[p + 6]]
                           ^ tables[0, data[p + 7]])
                    p += 8
                while p < stop:
                    crc = tables[0, (crc ^ np.uint32(data[p])) & np.uint32(0xFF)] ^ (crc >> np.uint32(8))
                    p += 1
            whole = np.uint64(crc ^ np.uint32(0xFFFFFFFF))
            masked = ((((whole >> np.uint64(15)) | (whole << np.uint64(17))) & np.uint64(0xFFFFFFFF))
                      + np.uint64(0xA282EAD8)) & np.uint64(0xFFFFFFFF)
            for j in range(4):
                if k == 0:
                    heads[i, 8 + j] = (masked >> np.uint64(8 * j)) & np.uint64(0xFF)
                else:
                    tails[i, j] = (masked >> np.uint64(8 * j)) & np.uint64(0xFF)
        at += n


def records(data: bytes, sizes: list[int]) -> bytes:
    """The TFRecord frames of many records joined in ``data`` (``sizes``: each one's length)."""
    return b"".join(frames(data, sizes))


def frames(data: bytes, sizes: list[int]) -> list:
    """``records`` as the pieces to write one after the other (``file.writelines``): each
    frame's beginning, its record (a view into ``data``) and its end; the CRCs in one pass."""
    lengths = np.array(sizes, np.int64)
    heads, tails = np.empty((len(lengths), 12), np.uint8), np.empty((len(lengths), 4), np.uint8)
    _frame_ends(np.frombuffer(data, np.uint8), lengths, _TABLES, heads, tails)
    head, tail, view = heads.tobytes(), tails.tobytes(), memoryview(data)
    parts, at = [], 0
    for i, size in enumerate(lengths.tolist()):
        parts += (head[12 * i:12 * i + 12], view[at:at + size], tail[4 * i:4 * i + 4])
        at += size
    return parts


def record(data: bytes) -> bytes:
    """One TFRecord frame of ``data``."""
    return records(data, [len(data)])


_SMALL = [bytes((i,)) if i < 128 else bytes((i & 0x7F | 0x80, i >> 7)) for i in range(1 << 14)]


def varint(value: int) -> bytes:
    if value < 16384:
        return _SMALL[value]
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return _SMALL[number << 3 | 2] + varint(len(payload)) + payload


def _double(key: int, value: float) -> bytes:
    raw = struct.pack("<d", value)
    return b"" if raw == _ZERO8 else _SMALL[key] + raw  # proto3: +0.0 is left out


_ZERO4, _ZERO8 = bytes(4), bytes(8)


def scalar_values(tags: list[bytes], values: np.ndarray, cache: dict[bytes, tuple[bytes, bytes]]
                  ) -> bytes:
    """``Summary.Value(tag=…, simple_value=…)`` of each tag (UTF-8) and value, as float32 as
    the proto keeps it (out of float32's range: ±inf, as protobuf converts), joined;
    ``cache`` keeps each tag's encoded beginnings (with and without a value) between calls."""
    with np.errstate(over="ignore"):
        raw = np.asarray(values, np.float64).astype("<f4").tobytes()
    out = []
    for k, tag in enumerate(tags):
        ends = cache.get(tag)
        if ends is None:
            named = _field(1, tag)
            ends = cache[tag] = (_field(1, named), _SMALL[0x0A] + varint(len(named) + 5) + named + b"\x15")
        v = raw[4 * k:4 * k + 4]
        out.append(ends[0] if v == _ZERO4 else ends[1] + v)
    return b"".join(out)


class ScalarLayout:
    """The ``Summary.Value`` scalars of many tags written at once: for a set of tags (a step's
    parameters × figures that have values), the encoded values with 4-byte slots, kept; each
    step then fills the slots with its float32 values (one numpy copy, no per-value call).
    Zero values are written as a field too (proto3 readers take it as the same 0)."""

    def __init__(self) -> None:
        self._layouts: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}

    def encode(self, key: bytes, tags, values: np.ndarray) -> bytes:
        """The values of ``tags()`` (called only for a new ``key``: which slots are set)."""
        layout = self._layouts.get(key)
        if layout is None:
            parts, offsets, at = [], [], 0
            for tag in tags():
                named = _field(1, tag)
                head = _SMALL[0x0A] + varint(len(named) + 5) + named + b"\x15"
                parts.append(head + _ZERO4)
                offsets.append(at + len(head))
                at += len(head) + 4
            slots = (np.array(offsets, np.int64)[:, None] + np.arange(4)).ravel()
            layout = self._layouts[key] = (np.frombuffer(b"".join(parts), np.uint8), slots)
        template, slots = layout
        out = template.copy()
        with np.errstate(over="ignore"):
            out[slots] = np.asarray(values, np.float64).astype("<f4").view(np.uint8)
        return out.tobytes()


def histogram_value(tag: bytes, low: float, high: float, num: float, total: float,
                    squares: float, limits: np.ndarray, counts: np.ndarray) -> bytes:
    """``Summary.Value(tag=…, histo=HistogramProto(…))`` (limits and counts as float64)."""
    body = struct.pack("<BdBdBdBdBd", 0x09, low, 0x11, high, 0x19, num, 0x21, total, 0x29, squares)
    if len(limits):
        body += _field(6, np.asarray(limits, "<f8").tobytes())
    if len(counts):
        body += _field(7, np.asarray(counts, "<f8").tobytes())
    return _field(1, _field(1, tag) + _field(5, body))


def histogram_values(tags: list[bytes], header: np.ndarray, limits: np.ndarray, counts: np.ndarray,
                     cache: dict[tuple[bytes, int], bytes]) -> list[tuple[bytes, memoryview]]:
    """``histogram_value`` of many histograms of one bucket count at once: ``header`` (n, 5)
    min, max, num, sum, sum_squares; ``limits`` and ``counts`` (n, m). The bodies are one
    packed numpy record each (every scalar written, zeros too: proto3 readers take an explicit
    0 as the same value); ``cache`` keeps each tag's encoded beginning between calls. Each
    value is returned as its two pieces (beginning, body: a view, not a copy); ``event`` joins
    them."""
    raw, size = _bodies(header, limits, counts)
    view = memoryview(raw.reshape(-1))
    return [(_head(tag, size, cache), view[i * size:(i + 1) * size]) for i, tag in enumerate(tags)]


def histogram_value_steps(tags: list[bytes], header: np.ndarray, limits: np.ndarray,
                          counts: np.ndarray, cache: dict[tuple[bytes, int], bytes]) -> np.ndarray:
    """``histogram_values`` of the same ``tags`` at many steps, the rows step after step (the
    first step's ``len(tags)`` histograms in the order of ``tags``, then the next step's …):
    ``(steps, bytes)``, each row a step's values joined (a row's bytes: a copy of each
    beginning and body, made for every step at once)."""
    raw, size = _bodies(header, limits, counts)
    heads = [np.frombuffer(_head(tag, size, cache), np.uint8) for tag in tags]
    bodies = raw.reshape(-1, len(tags), size)
    out = np.empty((len(bodies), sum(map(len, heads)) + len(tags) * size), np.uint8)
    at = 0
    for p, head in enumerate(heads):
        out[:, at:at + len(head)] = head
        out[:, at + len(head):at + len(head) + size] = bodies[:, p]
        at += len(head) + size
    return out


def _bodies(header: np.ndarray, limits: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, int]:
    """The ``HistogramProto`` bodies of ``histogram_values``: (n, size) bytes, and size."""
    n, m = limits.shape
    packed = varint(8 * m)
    kind = np.dtype([*((f"h{j}", [("k", "u1"), ("v", "<f8")]) for j in range(5)), ("lk", "u1"),
                     ("ll", f"V{len(packed)}"), ("limits", "<f8", (m,)),
                     ("ck", "u1"), ("cl", f"V{len(packed)}"), ("counts", "<f8", (m,))])
    body = np.empty(n, kind)
    for j, key in enumerate((0x09, 0x11, 0x19, 0x21, 0x29)):
        body[f"h{j}"]["k"] = key
        body[f"h{j}"]["v"] = header[:, j]
    body["lk"], body["ck"] = 0x32, 0x3A
    body["ll"] = body["cl"] = np.frombuffer(packed, f"V{len(packed)}")[0]
    body["limits"], body["counts"] = limits, counts
    return body.view(np.uint8).reshape(n, kind.itemsize), kind.itemsize


def _head(tag: bytes, size: int, cache: dict[tuple[bytes, int], bytes]) -> bytes:
    """A histogram value's beginning: the field, its length, the tag, the body's field."""
    head = cache.get((tag, size))
    if head is None:
        named = _field(1, tag)
        inner = len(named) + 1 + len(varint(size)) + size
        head = cache[(tag, size)] = _SMALL[0x0A] + varint(inner) + named + b"\x2a" + varint(size)
    return head


def event(wall_time: float, step: int, values: list) -> bytes:
    """``Event(wall_time=…, step=…, summary=Summary(value=values))`` (``values``: encoded
    ``Summary.value`` fields as the functions above give them, bytes or pieces of bytes)."""
    return b"".join(event_pieces(wall_time, step, values))


def event_pieces(wall_time: float, step: int, values: list) -> list:
    """``event``'s bytes as a list of pieces (bytes and memoryviews; joined, they are the
    event): many events' pieces are joined once (``records``)."""
    pieces = [p for v in values for p in ((v,) if isinstance(v, bytes) else v)]
    size = sum(map(len, pieces))
    return [_double(0x09, wall_time) + (b"\x10" + varint(step) if step else b"")  # summary: set,
            + _SMALL[5 << 3 | 2] + varint(size), *pieces]  # so present even when empty


def file_version_event(wall_time: float) -> bytes:
    """The first event of a file: ``Event(wall_time=…, file_version="brain.Event:2")``."""
    return _double(0x09, wall_time) + _field(3, b"brain.Event:2")
