"""Choosing the device a session trains on."""

from __future__ import annotations

import torch

from gradexplorer.core.errors import UserError


def mps_available() -> bool:
    """Whether Apple's Metal backend is usable."""
    backend = getattr(torch.backends, "mps", None)
    return bool(backend and backend.is_available())


def available_devices() -> list[str]:
    """Device names this machine can train on, CPU first."""
    names = ["cpu"]
    if torch.cuda.is_available():
        names += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if mps_available():
        names.append("mps")
    return names


def describe_device(device: torch.device) -> str:
    """A human name such as ``cuda:0 (NVIDIA H200)``."""
    if device.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    return str(device)


def resolve_device(name: str = "auto") -> torch.device:
    """``auto|cpu|cuda|cuda:N|mps`` to a present device, or a clear UserError."""
    name = (name or "auto").strip().lower()
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("mps") if mps_available() else torch.device("cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name == "mps":
        if not mps_available():
            raise UserError("device 'mps' is not available here (no Apple Metal backend)")
        return torch.device("mps")
    if name == "cuda" or name.startswith("cuda:"):
        return _cuda_device(name)
    raise UserError(f"unknown device {name!r}; use auto, cpu, cuda, cuda:N or mps")


def _cuda_device(name: str) -> torch.device:
    if not torch.cuda.is_available():
        why = "this torch build has no CUDA support" if torch.version.cuda is None else (
            "no CUDA device was found"
        )
        raise UserError(f"device {name!r} is not available: {why}; try --device cpu")
    index_text = name.partition(":")[2]
    if not index_text:
        return torch.device("cuda", torch.cuda.current_device())
    if not index_text.isdigit():
        raise UserError(f"bad device {name!r}: expected cuda:N with N a number")
    count = torch.cuda.device_count()
    if int(index_text) >= count:
        raise UserError(f"device {name!r} is not available: this machine has {count} CUDA device(s)")
    return torch.device("cuda", int(index_text))
