"""The one schema check of a snapshot manifest: every field, before anything uses it.

A manifest's digest proves only that nobody changed it by accident (it holds no secret), so
``inspect``, ``compare`` and ``open`` treat it as untrusted input: each field is checked for
type and range here and a failure is one line naming the field. Text that will be printed
(model name, device, versions, hook descriptions) has its control characters escaped, so a
crafted ``\\x1b[2J`` cannot drive the terminal.
"""

from __future__ import annotations

import math
import re
from typing import Any

from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.messages.printable import CONTROL, printable
from gradexplorer.core.snapshot import format as F
from gradexplorer.core.stats.records import STAT_FIELDS

MAX_COUNT = 2**63 - 1  # counts and sizes must fit an int64
MAX_BINS = 1 << 20
COUNT_FIELDS = ("nan_count", "inf_count")
NONFINITE = ("nan", "inf", "-inf")
TEXT_FIELDS = ("model", "model_description", "device", "dtype", "torch_version",
               "gradexplorer_version", "created")


class _Checker:
    def __init__(self, where: str) -> None:
        self.where = where

    def fail(self, field: str, what: str) -> UserError:
        return UserError(f"{self.where}: manifest field {field} {what}")

    def integer(self, value: Any, field: str, lo: int = 0, hi: int = MAX_COUNT) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(field, f"must be an integer, not {_kind(value)}")
        if not lo <= value <= hi:
            raise self.fail(field, f"is out of range ({_short(value)} not in {lo}..{hi})")
        return value

    def number(self, value: Any, field: str, nonfinite: bool = True) -> float:
        if nonfinite and value in NONFINITE:
            return float(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(field, f"must be a number, not {_kind(value)}")
        if not math.isfinite(float(value)):
            raise self.fail(field, "must be finite")
        return float(value)

    def text(self, value: Any, field: str, plain: bool = False) -> str:
        if not isinstance(value, str):
            raise self.fail(field, f"must be text, not {_kind(value)}")
        if plain and CONTROL.search(value):
            raise self.fail(field, f"holds control characters ({printable(value)[:60]})")
        return value if plain else printable(value)

    def mapping(self, value: Any, field: str) -> dict:
        if not isinstance(value, dict):
            raise self.fail(field, f"must be an object, not {_kind(value)}")
        return value

    def sequence(self, value: Any, field: str) -> list:
        if not isinstance(value, list):
            raise self.fail(field, f"must be a list, not {_kind(value)}")
        return value

    def shape(self, value: Any, field: str) -> list[int]:
        dims = [self.integer(d, f"{field}[{i}]") for i, d in enumerate(self.sequence(value, field))]
        if math.prod(dims) > MAX_COUNT:
            raise self.fail(field, "describes more elements than fit in an int64")
        return dims


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 24 else text[:21] + "…"


def validate_manifest(manifest: dict[str, Any], where: str) -> dict[str, Any]:
    """Check every field of ``manifest`` (already digest-verified); return it display-safe."""
    c = _Checker(where)
    m = dict(manifest)
    c.integer(m.get("step"), "step")
    for name in TEXT_FIELDS:
        if m.get(name) is not None:
            m[name] = c.text(m[name], name)
    optimizer = c.mapping(m.get("optimizer", {}), "optimizer")
    m["optimizer"] = {**optimizer}
    if "name" in optimizer:
        m["optimizer"]["name"] = c.text(optimizer["name"], "optimizer.name")
    if "lr" in optimizer:
        c.number(optimizer["lr"], "optimizer.lr")
    m["hooks"] = [_hook(c, h, f"hooks[{i}]") for i, h in enumerate(c.sequence(m.get("hooks", []), "hooks"))]
    if m.get("global_norm") is not None:
        c.number(m["global_norm"], "global_norm")
    c.integer(m.get("total_numel"), "total_numel")
    settings = c.mapping(m.get("histogram", {}), "histogram")
    if "bins" in settings:
        c.integer(settings["bins"], "histogram.bins", 1, MAX_BINS)
    if "range" in settings and not isinstance(settings["range"], (str, list)):
        raise c.fail("histogram.range", f"must be text or [lo, hi], not {_kind(settings['range'])}")
    if isinstance(settings.get("range"), str):
        settings = {**settings, "range": printable(settings["range"])}
    m["histogram"] = settings
    names: set[str] = set()
    for i, p in enumerate(c.sequence(m.get("parameters"), "parameters")):
        _parameter(c, p, f"parameters[{i}]", names)
    for i, e in enumerate(c.sequence(m.get("extra_tensors", []), "extra_tensors")):
        e = c.mapping(e, f"extra_tensors[{i}]")
        key = c.text(e.get("key"), f"extra_tensors[{i}].key", plain=True)
        if not key.startswith(F.EXTRA_PREFIX) or key in names:
            raise c.fail(f"extra_tensors[{i}].key", f"must be a new name under {F.EXTRA_PREFIX}")
        names.add(key)
        c.shape(e.get("shape"), f"extra_tensors[{i}].shape")
    files = c.mapping(m.get("files"), "files")
    for name in (F.GRADIENTS_FILE, F.STATS_FILE):
        entry = c.mapping(files.get(name), f"files.{name}")
        c.integer(entry.get("bytes"), f"files.{name}.bytes")
        digest = c.text(entry.get("sha256"), f"files.{name}.sha256", plain=True)
        if not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise c.fail(f"files.{name}.sha256", "must be 64 hexadecimal digits")
    return m


def _hook(c: _Checker, hook: Any, field: str) -> dict:
    """A hook description, its text made printable (numbers such as ``calls`` kept)."""
    out = {}
    for key, value in c.mapping(hook, field).items():
        plain_number = isinstance(value, (int, float)) and not isinstance(value, bool)
        out[printable(key)] = value if plain_number else printable(str(value))
    return out


def _parameter(c: _Checker, p: Any, field: str, names: set[str]) -> None:
    p = c.mapping(p, field)
    name = c.text(p.get("name"), f"{field}.name", plain=True)
    if name in names:
        raise c.fail(f"{field}.name", f"repeats {name!r}")
    names.add(name)
    shape = c.shape(p.get("shape"), f"{field}.shape")
    numel = c.integer(p.get("numel"), f"{field}.numel")
    if numel != math.prod(shape):
        raise c.fail(f"{field}.numel", f"is {numel}, but its shape {shape} holds {math.prod(shape)}")
    c.text(p.get("dtype", ""), f"{field}.dtype", plain=True)
    if not isinstance(p.get("has_grad"), bool):
        raise c.fail(f"{field}.has_grad", f"must be true or false, not {_kind(p.get('has_grad'))}")
    stats = p.get("stats")
    if stats is not None:
        for key, value in c.mapping(stats, f"{field}.stats").items():
            if key not in STAT_FIELDS or value is None:
                continue
            if key in COUNT_FIELDS:
                c.integer(value, f"{field}.stats.{key}", 0, numel)
            else:
                c.number(value, f"{field}.stats.{key}")
    elif p["has_grad"]:
        raise c.fail(f"{field}.stats", "is missing for a parameter with a gradient")
    if p.get("histogram") is not None:
        _histogram(c, p["histogram"], f"{field}.histogram", numel)


def _histogram(c: _Checker, h: Any, field: str, numel: int) -> None:
    h = c.mapping(h, field)
    counts = [c.integer(v, f"{field}.counts[{i}]", 0, numel)
              for i, v in enumerate(c.sequence(h.get("counts"), f"{field}.counts"))]
    edges = [c.number(v, f"{field}.edges[{i}]", nonfinite=False)
             for i, v in enumerate(c.sequence(h.get("edges"), f"{field}.edges"))]
    if not counts or len(edges) != len(counts) + 1:
        raise c.fail(f"{field}.edges", f"must hold one more entry than counts "
                     f"({len(edges)} edges for {len(counts)} counts)")
    if any(b < a for a, b in zip(edges, edges[1:], strict=False)):
        raise c.fail(f"{field}.edges", "must not decrease")
    extra = [c.integer(h.get(k, 0), f"{field}.{k}", 0, numel)
             for k in ("nan_count", "inf_count", "below", "above")]
    if sum(counts) + sum(extra) > numel:
        raise c.fail(f"{field}.counts", f"add up to more than the {numel} elements of the gradient")
