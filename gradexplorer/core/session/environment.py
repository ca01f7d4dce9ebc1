"""Versions and devices: the details people paste into bug reports."""

from __future__ import annotations

import platform
import sys
from importlib import metadata

import torch

from gradexplorer.core.session.devices import available_devices


def package_version(name: str) -> str:
    """Installed version of a distribution, or 'not installed'."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def environment_facts() -> dict[str, str]:
    """Python, torch, Qt and device facts as a flat mapping."""
    cuda = torch.version.cuda or "none"
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "torch": torch.__version__,
        "cuda": cuda,
        "PySide6": package_version("PySide6-Essentials"),
        "pyqtgraph": package_version("pyqtgraph"),
        "devices": ", ".join(available_devices()),
    }


def environment_summary() -> str:
    """One ``key: value`` line per fact."""
    return "\n".join(f"{k}: {v}" for k, v in environment_facts().items())
