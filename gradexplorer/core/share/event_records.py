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


def _crc_table() -> np.ndarray:
    table = np.zeros(256, np.uint32)
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table[i] = crc
    return table


_TABLE = _crc_table()


@njit(nogil=True, cache=True)
def _crc32c(data, table):
    crc = np.uint32(0xFFFFFFFF)
    for byte in data:
        crc = table[(crc ^ byte) & np.uint32(0xFF)] ^ (crc >> np.uint32(8))
    return crc ^ np.uint32(0xFFFFFFFF)


def masked_crc32c(data: bytes) -> int:
    """TensorBoard's ``masked_crc32c`` of ``data``."""
    crc = int(_crc32c(np.frombuffer(data, np.uint8), _TABLE))
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def record(data: bytes) -> bytes:
    """One TFRecord frame of ``data``."""
    header = struct.pack("<Q", len(data))
    return header + struct.pack("<I", masked_crc32c(header)) + data + struct.pack(
        "<I", masked_crc32c(data))


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


def histogram_value(tag: bytes, low: float, high: float, num: float, total: float,
                    squares: float, limits: np.ndarray, counts: np.ndarray) -> bytes:
    """``Summary.Value(tag=…, histo=HistogramProto(…))`` (limits and counts as float64)."""
    body = (_double(0x09, low) + _double(0x11, high) + _double(0x19, num) + _double(0x21, total)
            + _double(0x29, squares))
    if len(limits):
        body += _field(6, np.asarray(limits, "<f8").tobytes())
    if len(counts):
        body += _field(7, np.asarray(counts, "<f8").tobytes())
    return _field(1, _field(1, tag) + _field(5, body))


def event(wall_time: float, step: int, values: list[bytes]) -> bytes:
    """``Event(wall_time=…, step=…, summary=Summary(value=values))`` (``values``: encoded
    ``Summary.value`` fields, as the two functions above give them)."""
    out = _double(0x09, wall_time) + (b"\x10" + varint(step) if step else b"")
    summary = b"".join(values)
    return out + _field(5, summary)  # set, so present even when empty


def file_version_event(wall_time: float) -> bytes:
    """The first event of a file: ``Event(wall_time=…, file_version="brain.Event:2")``."""
    return _double(0x09, wall_time) + _field(3, b"brain.Event:2")
