"""The one safetensors reader (core/files/safetensors_file.py): every dtype a snapshot or a
weights file holds reads back equal to safetensors' own loader, element for element, whole or
in float64 chunks; a malformed file is one UserError, never a crash or a huge allocation."""

import json
import struct

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from gradexplorer.core.files.safetensors_file import SafetensorsFile
from gradexplorer.core.messages.errors import UserError

DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32,
          torch.int16, torch.int8, torch.uint8, torch.bool]


def test_every_dtype_reads_as_safetensors_own_loader_reads_it(tmp_path):
    g = torch.Generator().manual_seed(0)
    tensors = {f"t.{str(d).split('.')[1]}": (torch.randn(7, 33, generator=g) * 50).to(d)
               for d in DTYPES}
    tensors["empty"] = torch.zeros(0, 3)
    tensors["scalar"] = torch.tensor(2.5)
    path = tmp_path / "x.safetensors"
    save_file(tensors, path, metadata={"note": "metadata is not a tensor"})
    theirs = load_file(path)
    with SafetensorsFile(path) as f:
        assert sorted(f.keys()) == sorted(theirs)
        for key, want in theirs.items():
            got = f.tensor(key)
            assert got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want)
            assert f.shape(key) == list(want.shape) and f.numel(key) == want.numel()
            chunked = np.concatenate([np.zeros(0), *f.chunks(key, chunk=50)])
            np.testing.assert_array_equal(chunked, want.reshape(-1).double().numpy())


def header_file(path, header: dict, data: bytes = b"", length: int | None = None):
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text) if length is None else length) + text + data)
    return path


@pytest.mark.parametrize("header, data, length, why", [
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 4, None, "outside"),
    ({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8, None, "fit its shape"),
    ({"a": {"dtype": "X9", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8, None, "dtype"),
    ({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, b"\0" * 8, None, "shape"),
    ({"a": {"dtype": "F32", "shape": [2]}}, b"\0" * 8, None, "byte range"),
    ({}, b"", 2**60, "header of"),
    (["a"], b"", None, "JSON object"),
])
def test_a_malformed_file_is_one_user_error(tmp_path, header, data, length, why):
    path = header_file(tmp_path / "bad.safetensors", header, data, length)
    with pytest.raises(UserError, match=f"not a readable safetensors file.*{why}"):
        SafetensorsFile(path)
