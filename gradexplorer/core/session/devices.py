"""Choosing the device a session trains on."""

from __future__ import annotations

import sys

import torch

from gradexplorer.core.messages.errors import UserError


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


def unavailable_devices() -> dict[str, str]:
    """Device kinds this machine cannot train on, each with the reason in words.

    ``{"cuda": "torch 2.x+cpu was built without CUDA", "mps": "MPS needs macOS ..."}``;
    kinds that are available are absent.
    """
    reasons = {}
    if not torch.cuda.is_available():
        reasons["cuda"] = _cuda_absence()
    if not mps_available():
        reasons["mps"] = _mps_absence()
    return reasons


def _cuda_absence() -> str:
    if torch.version.cuda is None and getattr(torch.version, "hip", None) is None:
        return f"torch {torch.__version__} was built without CUDA (a CPU-only build)"
    return f"torch {torch.__version__} has CUDA support but found no CUDA device or driver"


def _mps_absence() -> str:
    if sys.platform != "darwin":
        return "MPS (Apple Metal) needs macOS on Apple silicon"
    backend = getattr(torch.backends, "mps", None)
    if backend is None or not backend.is_built():
        return f"torch {torch.__version__} was built without MPS"
    return "MPS is not available on this Mac (it needs Apple silicon and macOS 12.3 or later)"


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
            raise UserError(f"device 'mps' is not available: {_mps_absence()}; try --device cpu")
        return torch.device("mps")
    if name == "cuda" or name.startswith("cuda:"):
        return _cuda_device(name)
    raise UserError(f"unknown device {name!r}; use auto, cpu, cuda, cuda:N or mps")


def _cuda_device(name: str) -> torch.device:
    if not torch.cuda.is_available():
        raise UserError(f"device {name!r} is not available: {_cuda_absence()}; try --device cpu")
    index_text = name.partition(":")[2]
    if not index_text:
        return torch.device("cuda", torch.cuda.current_device())
    if not index_text.isdigit():
        raise UserError(f"bad device {name!r}: expected cuda:N with N a number")
    count = torch.cuda.device_count()
    if int(index_text) >= count:
        raise UserError(f"device {name!r} is not available: this machine has {count} CUDA device(s)")
    return torch.device("cuda", int(index_text))
