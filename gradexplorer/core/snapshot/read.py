"""Read and verify a gradient snapshot; anything missing, truncated or altered is refused.

Tensors load through the one safetensors reader (``core/files/safetensors_file.py``): nothing
is ever unpickled.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gradexplorer.core.files.bounded_json import MAX_BYTES, load_bounded
from gradexplorer.core.files.safetensors_file import SafetensorsFile
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.snapshot import format as F
from gradexplorer.core.snapshot.schema import validate_manifest
from gradexplorer.core.stats.records import STAT_FIELDS, Histogram, ParamStats


@dataclass
class Snapshot:
    """A verified snapshot directory."""

    path: Path
    manifest: dict[str, Any]

    @property
    def step(self) -> int:
        return int(self.manifest["step"])

    @property
    def parameters(self) -> list[dict[str, Any]]:
        """The manifest's per-parameter entries, in ``named_parameters()`` order."""
        return self.manifest["parameters"]

    @cached_property
    def stats(self) -> dict[str, ParamStats]:
        """ParamStats of every parameter, decoded from the manifest."""
        out = {}
        for p in self.parameters:
            figures = {k: F.decode_number(v) for k, v in (p["stats"] or {}).items() if k in STAT_FIELDS}
            out[p["name"]] = ParamStats(p["name"], tuple(p["shape"]), p["numel"], p["has_grad"], **figures)
        return out

    @cached_property
    def histograms(self) -> dict[str, Histogram]:
        """Histograms recorded in the manifest, by parameter name."""
        out = {}
        for p in self.parameters:
            h = p.get("histogram")
            if h:
                out[p["name"]] = Histogram(
                    np.asarray(h["edges"], dtype=np.float64), np.asarray(h["counts"], dtype=np.int64),
                    h.get("nan_count", 0), h.get("inf_count", 0), h.get("below", 0), h.get("above", 0),
                )
        return out

    @property
    def global_norm(self) -> float | None:
        return F.decode_number(self.manifest.get("global_norm"))

    def gradient_names(self) -> list[str]:
        """Names of the parameters whose gradient the snapshot holds."""
        return [p["name"] for p in self.parameters if p["has_grad"]]

    def gradients(self, names: list[str] | None = None) -> dict[str, torch.Tensor]:
        """Gradient tensors (CPU) by parameter name; all of them unless ``names`` is given."""
        return self._load(self.gradient_names() if names is None else names)

    def extra_tensors(self) -> dict[str, torch.Tensor]:
        """Tensors captured by hooks, keyed ``hooks/<key>``."""
        return self._load([e["key"] for e in self.manifest.get("extra_tensors", [])])

    def _load(self, keys: list[str]) -> dict[str, torch.Tensor]:
        with SafetensorsFile(self.path / F.GRADIENTS_FILE) as f:  # the one safetensors reader
            return {k: f.tensor(k) for k in keys}


def resolve_snapshot_dir(path: str | os.PathLike) -> Path:
    """The snapshot directory ``path`` names (a manifest.json path names its directory)."""
    p = Path(path)
    if p.is_file() and p.name == F.MANIFEST_FILE:
        p = p.parent
    if not p.exists():
        raise UserError(f"{path}: no such snapshot directory")
    if not p.is_dir():
        raise UserError(f"{path}: not a directory (a snapshot is a directory with {F.MANIFEST_FILE})")
    if not (p / F.MANIFEST_FILE).is_file():
        inside = sorted(c.name for c in p.glob(F.SNAPSHOT_PREFIX + "*") if (c / F.MANIFEST_FILE).is_file())
        if inside:
            raise UserError(f"{path} holds {len(inside)} snapshot(s); name one, e.g. {p / inside[-1]}")
        raise UserError(f"{path}: not a gradexplorer snapshot (no {F.MANIFEST_FILE})")
    return p


def _load_manifest(p: Path) -> dict[str, Any]:
    where = f"{p}: {F.MANIFEST_FILE}"
    try:
        if (p / F.MANIFEST_FILE).stat().st_size > MAX_BYTES:
            raise UserError(f"{where} is too large (at most {MAX_BYTES / 2**20:,.0f} MB)")
        data = (p / F.MANIFEST_FILE).read_bytes()
    except OSError as exc:
        raise UserError(f"{where} is unreadable ({exc.strerror or exc})") from None
    manifest = load_bounded(data, where)
    if not isinstance(manifest, dict) or manifest.get("format") != F.FORMAT:
        raise UserError(f"{p}: {F.MANIFEST_FILE} is not a gradexplorer snapshot manifest")
    version = manifest.get("version")
    if not isinstance(version, int) or version > F.VERSION:
        raise UserError(f"{p}: snapshot format version {version!r} is newer than this gradexplorer reads")
    if manifest.get("manifest_sha256") != F.manifest_digest(manifest):
        raise UserError(f"{p}: {F.MANIFEST_FILE} was modified after it was written (digest mismatch)")
    return manifest


def _verify_files(p: Path, manifest: dict[str, Any]) -> None:
    files = manifest.get("files") or {}
    for name in (F.GRADIENTS_FILE, F.STATS_FILE):
        expected = files.get(name)
        path = p / name
        if expected is None:
            raise UserError(f"{p}: manifest lists no digest for {name}")
        if not path.is_file():
            raise UserError(f"{p}: {name} is missing")
        size = path.stat().st_size
        if size != expected["bytes"]:
            kind = "truncated" if size < expected["bytes"] else "longer than recorded"
            raise UserError(f"{p}: {name} is {kind} ({size} of {expected['bytes']} bytes)")
        if F.file_digest(path)["sha256"] != expected["sha256"]:
            raise UserError(f"{p}: {name} does not match its recorded sha256 (altered or corrupt)")


def _verify_tensors(p: Path, manifest: dict[str, Any]) -> None:
    expected = {q["name"]: q["shape"] for q in manifest["parameters"] if q["has_grad"]}
    expected.update({e["key"]: e["shape"] for e in manifest.get("extra_tensors", [])})
    with SafetensorsFile(p / F.GRADIENTS_FILE) as f:  # a bad file: one UserError
        found = {k: f.shape(k) for k in f.keys()}
    if found != expected:
        raise UserError(f"{p}: {F.GRADIENTS_FILE} does not hold the tensors its manifest lists")


def read_snapshot(path: str | os.PathLike) -> Snapshot:
    """Open and verify a snapshot directory: every manifest field (``schema``), file sizes and
    sha256 digests, tensor names and shapes."""
    p = resolve_snapshot_dir(path)
    manifest = validate_manifest(_load_manifest(p), str(p))
    try:
        _verify_files(p, manifest)
        _verify_tensors(p, manifest)
    except (KeyError, TypeError) as exc:
        raise UserError(f"{p}: {F.MANIFEST_FILE} lacks an expected field ({exc})") from None
    return Snapshot(p, manifest)
