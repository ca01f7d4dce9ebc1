"""Write a gradient snapshot atomically: a temporary directory, then one rename."""

from __future__ import annotations

import csv
import json
import os
import shutil
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import save_file

from gradexplorer._version import __version__
from gradexplorer.core.files.atomic_file import current_umask
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.snapshot import format as F
from gradexplorer.core.stats.records import STAT_FIELDS, Histogram, ParamStats, StepGradients

CSV_COLUMNS = ("step", "name", "shape", "numel", "has_grad", *STAT_FIELDS)


@dataclass(frozen=True)
class SnapshotSource:
    """What a snapshot is taken of: the model (its gradients), its optimizer, the steps done,
    the model's name and description, its device. ``of(session)`` for a TrainingSession;
    ``watch`` builds one from the model and optimizer it watches."""

    model: Any
    optimizer: Any
    step_count: int
    name: str
    description: str
    device: Any

    @classmethod
    def of(cls, session) -> SnapshotSource:
        """A TrainingSession's (or a SnapshotSource itself)."""
        if isinstance(session, SnapshotSource):
            return session
        return cls(session.model, session.optimizer, session.step_count, session.workload.name,
                   session.workload.description, session.device)


def write_snapshot(directory: str | os.PathLike, session, step_gradients: StepGradients | None = None,
                   hooks: list[dict] | None = None, extra_tensors: dict[str, Any] | None = None,
                   history: Iterable[StepGradients] | None = None, name: str | None = None,
                   diagnosis: dict[str, Any] | None = None, replace: bool = True) -> Path:
    """Write ``directory/step-NNNNNN`` (or ``directory/name``) and return its path.

    An existing snapshot of that name is replaced atomically, or with ``replace=False`` refused.

    Holds the gradients the session's model holds now, ``extra_tensors`` under ``hooks/<key>``,
    ``manifest.json`` and ``stats.csv`` (one row per parameter for each step of ``history``
    up to this one, or for this step alone). ``diagnosis`` (where this step's NaN/Inf was
    born, from ``NonFiniteOrigin``) goes to the manifest as ``nonfinite_origin``.
    """
    source = SnapshotSource.of(session)
    model = source.model
    record = _consistent_record(model, step_gradients, source.step_count)
    tensors = _gradient_tensors(model)
    tensors.update(_extra_tensors(extra_tensors or {}, tensors))
    rows = [r for r in (history or []) if r.step <= record.step and r is not record]
    target = Path(directory) / (name or F.snapshot_name(record.step))
    if not replace and target.exists():
        raise UserError(f"{target} already exists: export to another folder, or move it first")
    manifest = build_manifest(source, record, hooks or [], tensors)
    manifest["nonfinite_origin"] = None if diagnosis is None else json.loads(
        json.dumps({k: F.encode_number(v) for k, v in diagnosis.items()}, default=str))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _write_atomically(target, tensors, manifest, [*rows, record])
    except OSError as exc:
        raise UserError(f"could not write snapshot {target}: {exc.strerror or exc}") from None
    return target


def write_step_snapshot(directory: str | os.PathLike, session, record: StepGradients | None,
                        registry=None, history: Iterable[StepGradients] | None = None,
                        diagnosis: dict[str, Any] | None = None, replace: bool = True,
                        name: str | None = None) -> Path:
    """The one snapshot call of every entry point (the app's Export and periodic export,
    ``gradexplorer run --export``, ``watch(snapshot_every=)``), so that each writes the same
    contents: the gradients held now, the hooks of ``registry`` (a ``HookRegistry`` or None) as
    they shaped them (``step_hooks``) with the tensors its ``observe:capture`` hooks kept, the
    statistics of every step of ``history`` up to this one, and ``diagnosis`` (where this
    step's NaN/Inf was born)."""
    return write_snapshot(
        directory, session, record,
        hooks=registry.step_hooks() if registry is not None else [],
        extra_tensors=registry.captured_tensors() if registry is not None else {},
        history=history, name=name, diagnosis=diagnosis, replace=replace)


def _consistent_record(model, record: StepGradients | None, step: int) -> StepGradients:
    """The given record if it matches the gradients held now and has histograms, else fresh."""
    from gradexplorer.core.stats.monitor import gradient_stats

    held = {n for n, p in model.named_parameters() if p.grad is not None}
    if record is not None:
        recorded = {n for n, s in record.params.items() if s.has_grad}
        if recorded == held and set(record.histograms) == held:
            return record
        fresh = gradient_stats(model, record.bins, record.hist_range, step=record.step)
        if recorded == held:  # keep the monitor's figures (update ratios); add histograms
            record.histograms = fresh.histograms
            return record
        return fresh
    return gradient_stats(model, step=step)


def _gradient_tensors(model) -> dict[str, torch.Tensor]:
    """Dense CPU gradients; a complex one as its real and imaginary parts (last dimension 2),
    as the monitor measures it (the manifest's shapes are those of what was measured)."""
    from gradexplorer.core.stats.measured import measured_tensor

    return {n: measured_tensor(p.grad).detach().to("cpu").contiguous()
            for n, p in model.named_parameters() if p.grad is not None}


def _extra_tensors(extra: dict[str, Any], taken: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for key, value in extra.items():
        if value is None:
            continue
        if not isinstance(value, torch.Tensor):
            raise UserError(f"captured value {key!r} is a {type(value).__name__}, not a tensor")
        name = F.extra_key(key)
        if name in taken or name in out:
            raise UserError(f"captured tensor key {name!r} collides with another tensor")
        out[name] = value.detach().to("cpu").contiguous().clone()
    return out


def _histogram_json(h: Histogram | None) -> dict | None:
    if h is None:
        return None
    return {
        "edges": [float(e) for e in h.edges], "counts": [int(c) for c in h.counts],
        "nan_count": h.nan_count, "inf_count": h.inf_count, "below": h.below, "above": h.above,
    }


def _parameter_json(s: ParamStats, h: Histogram | None, dtype: str) -> dict:
    stats = {k: F.encode_number(v) for k, v in s.stats_dict().items()} if s.has_grad else None
    return {"name": s.name, "shape": list(s.shape), "numel": s.numel, "dtype": dtype,
            "has_grad": s.has_grad, "stats": stats, "histogram": _histogram_json(h)}


def build_manifest(source: SnapshotSource, record: StepGradients, hooks: list[dict],
                   tensors: dict[str, torch.Tensor]) -> dict[str, Any]:
    """Everything ``manifest.json`` says except the file digests."""
    dtypes = {n: str(p.dtype).removeprefix("torch.") for n, p in source.model.named_parameters()}
    optimizer = source.optimizer
    return {
        "format": F.FORMAT, "version": F.VERSION, "step": record.step,
        "model": source.name, "model_description": source.description,
        "device": str(source.device), "dtype": sorted(set(dtypes.values()))[0] if dtypes else None,
        "torch_version": torch.__version__, "gradexplorer_version": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "optimizer": None if optimizer is None else {
            "name": type(optimizer).__name__, "lr": optimizer.param_groups[0]["lr"]},
        "hooks": json.loads(json.dumps(hooks, default=str)),
        "global_norm": F.encode_number(record.global_norm), "total_numel": record.total_numel,
        "histogram": {"bins": record.bins, "range": record.hist_range},
        "parameters": [_parameter_json(s, record.histograms.get(n), dtypes.get(n, "?"))
                       for n, s in record.params.items()],
        "extra_tensors": [
            {"key": k, "shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")}
            for k, t in tensors.items() if k.startswith(F.EXTRA_PREFIX)
        ],
    }


def write_stats_csv(path: Path, records: Iterable[StepGradients]) -> None:
    """One row per parameter per step."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_COLUMNS)
        for record in records:
            for s in record.params.values():
                figures = ["" if v is None else v for v in s.stats_dict().values()]
                shape = "x".join(str(d) for d in s.shape)
                writer.writerow([record.step, s.name, shape, s.numel, int(s.has_grad), *figures])
        f.flush()
        os.fsync(f.fileno())


def _write_atomically(target: Path, tensors: dict[str, torch.Tensor], manifest: dict,
                      records: list[StepGradients]) -> None:
    tmp = target.parent / f".{target.name}.partial-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        save_file(tensors, str(tmp / F.GRADIENTS_FILE), metadata={"format": F.FORMAT})
        os.chmod(tmp / F.GRADIENTS_FILE, 0o666 & ~current_umask())
        _fsync(tmp / F.GRADIENTS_FILE)
        write_stats_csv(tmp / F.STATS_FILE, records)
        manifest["files"] = {n: F.file_digest(tmp / n) for n in (F.GRADIENTS_FILE, F.STATS_FILE)}
        manifest["manifest_sha256"] = F.manifest_digest(manifest)
        text = json.dumps(manifest, indent=1, allow_nan=False)
        _write_text(tmp / F.MANIFEST_FILE, text)  # written last: its presence marks completion
        _replace_dir(tmp, target)
    except (OSError, SafetensorError) as exc:  # a full disk, a quota, a file size limit
        shutil.rmtree(tmp, ignore_errors=True)
        raise UserError(f"cannot write snapshot {target.name} in {str(target.parent)!r}: "
                        f"{_io_reason(exc)}") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _io_reason(exc: BaseException) -> str:
    """The operating system's words for a failed write (safetensors wraps them in its own)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc).rpartition("I/O error: ")[2].strip() or type(exc).__name__


def _write_text(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _replace_dir(tmp: Path, target: Path) -> None:
    """Rename ``tmp`` to ``target``; an older ``target`` is moved aside first, then removed."""
    old = None
    if target.exists():
        old = target.parent / f".{target.name}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        os.rename(target, old)
    os.rename(tmp, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
