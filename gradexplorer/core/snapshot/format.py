"""The snapshot directory format: names, JSON encoding of figures, file digests."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

FORMAT = "gradexplorer.snapshot"
VERSION = 1
GRADIENTS_FILE = "gradients.safetensors"
MANIFEST_FILE = "manifest.json"
STATS_FILE = "stats.csv"
EXTRA_PREFIX = "hooks/"  # captured tensors live under this key prefix, apart from parameters
SNAPSHOT_PREFIX = "step-"


def snapshot_name(step: int) -> str:
    """``step-000042``: directory name of the snapshot of ``step``."""
    return f"{SNAPSHOT_PREFIX}{step:06d}"


def extra_key(key: str) -> str:
    """Namespaced safetensors key of a captured tensor (``hooks/<key>``)."""
    return key if key.startswith(EXTRA_PREFIX) else EXTRA_PREFIX + key


def encode_number(value: Any) -> Any:
    """JSON-safe figure: non-finite floats become the strings ``nan``, ``inf``, ``-inf``."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def decode_number(value: Any) -> Any:
    """Inverse of ``encode_number``."""
    if isinstance(value, str) and value in ("nan", "inf", "-inf"):
        return float(value)
    return value


def file_digest(path: Path) -> dict[str, Any]:
    """``{"bytes": size, "sha256": hex}`` of a file."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return {"bytes": path.stat().st_size, "sha256": h.hexdigest()}


def manifest_digest(manifest: dict[str, Any]) -> str:
    """sha256 of the manifest's canonical JSON without its own ``manifest_sha256`` field."""
    body = {k: v for k, v in manifest.items() if k != "manifest_sha256"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()
