"""Read one tensor of a safetensors file in float64 chunks, never the whole of it at once.

The safetensors layout is public and simple: an 8-byte little-endian header length, a JSON
header naming each tensor's dtype, shape and byte range, then the raw little-endian data.
``compare`` reads two gradients side by side through this, so its memory stays a few chunks
whatever the size of the gradients.

Why not safetensors' own reader (``snapshot/read.py`` uses it for whole tensors): ``safe_open``
memory-maps the file, and every page a slice touches stays resident, so reading two large
gradients through it grows the process by both files (``tests/test_compare_memory.py`` measures
the peak); its public API gives no byte offsets to read from instead. This module reads with
plain ``read()`` calls, chunk by chunk.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np

from gradexplorer.core.messages.errors import UserError

CHUNK_ELEMENTS = 1 << 14  # 16,384 numbers (128 KB in float64) per read
DTYPES = {"F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
          "BF16": np.dtype("<u2"), "I64": np.dtype("<i8"), "I32": np.dtype("<i4"),
          "I16": np.dtype("<i2"), "I8": np.dtype("i1"), "U8": np.dtype("u1"),
          "BOOL": np.dtype("?")}


class TensorReader:
    """An open safetensors file: ``chunks(key)`` yields the tensor's values as float64 arrays."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._file: BinaryIO = open(self.path, "rb")  # noqa: SIM115 - closed by close()
        try:
            (length,) = struct.unpack("<Q", self._file.read(8))
            self.header = json.loads(self._file.read(length))
        except (struct.error, ValueError, MemoryError) as exc:
            self.close()
            raise UserError(f"{self.path}: not a readable safetensors file ({exc})") from None
        self._data_start = 8 + length

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> TensorReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def numel(self, key: str) -> int:
        return int(np.prod(self.header[key]["shape"], dtype=np.int64))

    def chunks(self, key: str, chunk: int = CHUNK_ELEMENTS) -> Iterator[np.ndarray]:
        """The tensor ``key`` flattened, ``chunk`` values at a time, as float64."""
        entry = self.header[key]
        dtype = DTYPES.get(entry["dtype"])
        if dtype is None:
            raise UserError(f"{self.path}: tensor {key} has unsupported dtype {entry['dtype']}")
        start, end = entry["data_offsets"]
        if end - start != self.numel(key) * dtype.itemsize:
            raise UserError(f"{self.path}: tensor {key} has a byte range that does not fit its shape")
        self._file.seek(self._data_start + start)
        remaining = self.numel(key)
        while remaining:
            count = min(chunk, remaining)
            raw = np.frombuffer(self._file.read(count * dtype.itemsize), dtype=dtype)
            if raw.size != count:
                raise UserError(f"{self.path}: tensor {key} is truncated")
            remaining -= count
            yield _as_float64(raw, entry["dtype"])


def _as_float64(raw: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "BF16":  # the top half of a float32
        return (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return raw.astype(np.float64)
