"""The one reader of safetensors files: a snapshot's gradients (``snapshot/read.py``), two
snapshots compared chunk by chunk (``snapshot/compare.py``) and a model's weights
(``model/weights.py``) are all read here, the header parsed and checked in one place.

The layout is public and simple: an 8-byte little-endian header length, a JSON header naming
each tensor's dtype, shape and byte range (and an optional ``__metadata__``), then the raw
little-endian data. Nothing in it is ever unpickled.

Why not safetensors' own reader: ``safe_open`` memory-maps the file, and every page a slice
touches stays resident, so reading a large gradient through ``get_slice`` in chunks grows the
process by the whole file (80 MB for an 80 MB tensor, measured; our chunked reads: under
1 MB; ``tests/test_compare_memory.py``); its public API gives no byte offsets to read from
instead. This module reads with plain ``read()`` calls: a whole tensor at once
(``tensor``), or chunk by chunk as float64 (``chunks``).
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from gradexplorer.core.messages.errors import UserError

CHUNK_ELEMENTS = 1 << 14  # 16,384 numbers (128 KB in float64) per read
MAX_HEADER = 100 * 2**20  # the largest header read (safetensors' own limit)
# dtype name -> (bytes per element, torch dtype name, numpy dtype of chunks' raw values)
DTYPES: dict[str, tuple[int, str, np.dtype | None]] = {
    "F64": (8, "float64", np.dtype("<f8")), "F32": (4, "float32", np.dtype("<f4")),
    "F16": (2, "float16", np.dtype("<f2")), "BF16": (2, "bfloat16", np.dtype("<u2")),
    "I64": (8, "int64", np.dtype("<i8")), "I32": (4, "int32", np.dtype("<i4")),
    "I16": (2, "int16", np.dtype("<i2")), "I8": (1, "int8", np.dtype("i1")),
    "U8": (1, "uint8", np.dtype("u1")), "BOOL": (1, "bool", np.dtype("?")),
    "U16": (2, "uint16", np.dtype("<u2")), "U32": (4, "uint32", np.dtype("<u4")),
    "U64": (8, "uint64", np.dtype("<u8")), "C64": (8, "complex64", None),
    "F8_E4M3": (1, "float8_e4m3fn", None), "F8_E5M2": (1, "float8_e5m2", None),
}


class SafetensorsFile:
    """An open safetensors file, its header checked: ``keys()``, ``shape(key)``,
    ``numel(key)``, ``tensor(key)`` (a CPU torch tensor), ``chunks(key)`` (float64 arrays).
    Anything malformed is one ``UserError``: ``PATH: not a readable safetensors file (why)``."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        try:
            self._file: BinaryIO = open(self.path, "rb")  # noqa: SIM115 - closed by close()
        except OSError as exc:
            raise UserError(f"{self.path}: cannot read it ({exc.strerror or exc})") from None
        try:
            self.header = self._read_header()
        except BaseException:
            self.close()
            raise

    def _bad(self, why: str) -> UserError:
        return UserError(f"{self.path}: not a readable safetensors file ({why})")

    def _read_header(self) -> dict[str, dict[str, Any]]:
        size = os.fstat(self._file.fileno()).st_size
        raw = self._file.read(8)
        if len(raw) < 8:
            raise self._bad("shorter than its 8-byte header length")
        (length,) = struct.unpack("<Q", raw)
        if length > min(MAX_HEADER, size - 8):
            raise self._bad(f"a header of {length:,} bytes in a file of {size:,}")
        try:
            header = json.loads(self._file.read(length))
        except (ValueError, UnicodeDecodeError) as exc:
            raise self._bad(f"its header is not JSON: {exc}") from None
        if not isinstance(header, dict):
            raise self._bad("its header is not a JSON object")
        self._data_start = 8 + length
        entries = {k: v for k, v in header.items() if k != "__metadata__"}
        for key, entry in entries.items():
            self._check(key, entry, size - self._data_start)
        return entries

    def _check(self, key: str, entry: Any, data_bytes: int) -> None:
        if not isinstance(entry, dict) or entry.get("dtype") not in DTYPES:
            raise self._bad(f"tensor {key!r} has no dtype this reader knows")
        shape, offsets = entry.get("shape"), entry.get("data_offsets")
        if not isinstance(shape, list) or not all(
                isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
            raise self._bad(f"tensor {key!r} has no valid shape")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(
                isinstance(n, int) and not isinstance(n, bool) for n in offsets)):
            raise self._bad(f"tensor {key!r} has no valid byte range")
        start, end = offsets
        if not 0 <= start <= end <= data_bytes:
            raise self._bad(f"tensor {key!r} lies outside the file (truncated?)")
        if end - start != math.prod(shape) * DTYPES[entry["dtype"]][0]:
            raise self._bad(f"tensor {key!r} has a byte range that does not fit its shape")

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> SafetensorsFile:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def keys(self) -> list[str]:
        """The tensors' names, in the header's order."""
        return list(self.header)

    def shape(self, key: str) -> list[int]:
        return list(self.header[key]["shape"])

    def numel(self, key: str) -> int:
        return math.prod(self.header[key]["shape"])

    def _bytes(self, key: str, start: int, count: int) -> bytearray:
        """``count`` bytes of ``key``'s data from byte ``start`` of it."""
        self._file.seek(self._data_start + self.header[key]["data_offsets"][0] + start)
        data = bytearray(count)
        if self._file.readinto(data) != count:
            raise self._bad(f"tensor {key!r} is truncated")
        return data

    def tensor(self, key: str):
        """The whole tensor ``key``, a CPU torch tensor of its own memory."""
        import torch

        entry = self.header[key]
        size, name, _ = DTYPES[entry["dtype"]]
        dtype, shape = getattr(torch, name), entry["shape"]
        count = self.numel(key)
        if count == 0:
            return torch.empty(shape, dtype=dtype)
        return torch.frombuffer(self._bytes(key, 0, count * size), dtype=dtype).reshape(shape)

    def chunks(self, key: str, chunk: int = CHUNK_ELEMENTS) -> Iterator[np.ndarray]:
        """The tensor ``key`` flattened, ``chunk`` values at a time, as float64."""
        dtype_name = self.header[key]["dtype"]
        size, _, raw_dtype = DTYPES[dtype_name]
        if raw_dtype is None:
            raise UserError(f"{self.path}: tensor {key} has a dtype ({dtype_name}) compared "
                            "only through torch")
        done, total = 0, self.numel(key)
        while done < total:
            count = min(chunk, total - done)
            raw = np.frombuffer(self._bytes(key, done * size, count * size), dtype=raw_dtype)
            done += count
            yield _as_float64(raw, dtype_name)


def _as_float64(raw: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "BF16":  # the top half of a float32
        return (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return raw.astype(np.float64)
