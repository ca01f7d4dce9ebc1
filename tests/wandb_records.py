"""Read an offline wandb run's ``.wandb`` file back (wandb ships no reader of its own): the
LevelDB-style log of 32 KiB blocks, each record a 7-byte header (crc32, length, type) and a
piece of a ``wandb_internal_pb2.Record``."""

from __future__ import annotations

import json
import struct
from pathlib import Path

BLOCK = 32768
HEADER = 7  # ":W&B", a 2-byte magic, a version byte; then records


def raw_records(path: Path) -> list[bytes]:
    data = Path(path).read_bytes()
    assert data[:4] == b":W&B", "not a wandb run file"
    pos, out, pending = HEADER, [], b""
    while pos + 7 <= len(data):
        left = BLOCK - pos % BLOCK
        if left < 7:  # a block's tail too short for a header is padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        payload = data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind == 1:  # full
            out.append(payload)
        elif kind == 2:  # first
            pending = payload
        elif kind == 3:  # middle
            pending += payload
        elif kind == 4:  # last
            out.append(pending + payload)
        elif kind == 0 and length == 0:
            pos += BLOCK - pos % BLOCK if pos % BLOCK else 0
    return out


def history_rows(path: Path) -> list[dict]:
    """Every ``run.log`` row: ``{key: value}`` decoded from JSON."""
    from wandb.proto import wandb_internal_pb2 as pb

    rows = []
    for raw in raw_records(path):
        record = pb.Record()
        record.ParseFromString(raw)
        if record.WhichOneof("record_type") == "history":
            rows.append({(item.key or "/".join(item.nested_key)): json.loads(item.value_json)
                         for item in record.history.item})
    return rows
