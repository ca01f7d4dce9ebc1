"""Versions and devices: the details people paste into bug reports.

Nothing here imports torch (``gradexplorer --version`` answers at once): torch's version and
CUDA/ROCm build are read from its ``version.py``, other libraries' versions from their installed
metadata, and the GPUs from what the NVIDIA driver lists. Whether torch itself can use them is
what ``available_devices()`` (``core/session/devices.py``, which imports torch) says.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from importlib import metadata
from importlib.machinery import PathFinder
from pathlib import Path

NVIDIA_PROC = Path("/proc/driver/nvidia/gpus")  # Linux: one folder per GPU, named by PCI bus id
NVIDIA_SMI_SECONDS = 2.0  # `nvidia-smi -L` where there is no /proc listing (Windows), at most


def package_version(name: str) -> str:
    """Installed version of a distribution, or 'not installed'."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def torch_build() -> dict[str, str | None]:
    """``__version__``, ``cuda`` and ``hip`` of the installed torch, read from its
    ``version.py`` (torch is not imported); an empty mapping when torch is not found."""
    try:
        spec = PathFinder.find_spec("torch")
        for folder in (spec.submodule_search_locations or ()) if spec is not None else ():
            text = (Path(folder) / "version.py").read_text(encoding="utf-8")
            return {name: _assigned(text, name) for name in ("__version__", "cuda", "hip")}
    except (ImportError, ValueError, OSError):
        pass
    return {}


def _assigned(text: str, name: str) -> str | None:
    """The string assigned to ``name`` at the top level of ``text`` (None: None, or absent)."""
    found = re.search(rf"""^{name}\s*(?::[^=\n]*)?=\s*['"]([^'"]*)['"]""", text, re.M)
    return found.group(1) if found else None


def torch_version() -> str | None:
    """The installed torch's version (torch is not imported), or None."""
    return torch_build().get("__version__")


def nvidia_gpus() -> list[str]:
    """The names of the GPUs the NVIDIA driver lists, in PCI order; none without a driver."""
    names = []
    try:
        for folder in sorted(NVIDIA_PROC.iterdir()):
            text = (folder / "information").read_text(encoding="utf-8", errors="replace")
            found = re.search(r"^Model:\s*(.+)$", text, re.M)
            names.append(found.group(1).strip() if found else folder.name)
        return names
    except OSError:
        pass
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True,
                             timeout=NVIDIA_SMI_SECONDS, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [m.group(1).strip() for m in re.finditer(r"^GPU \d+:\s*(.+?)(?:\s*\(UUID:.*)?$", out, re.M)]


def devices_text(build: dict[str, str | None], gpus: list[str]) -> str:
    """``cpu``, then the GPUs the driver lists and whether this torch build can drive them."""
    parts = ["cpu"]
    if gpus:
        listed = ", ".join(f"{i}: {name}" for i, name in enumerate(gpus))
        if build.get("cuda") or build.get("hip"):
            usable = "torch not imported: `gradexplorer run --device cuda` checks it can use them"
        else:
            usable = f"torch {build.get('__version__') or '(not installed)'} is built without " \
                "CUDA, so it cannot use them"
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        shown = f"; CUDA_VISIBLE_DEVICES={visible}" if visible is not None else ""
        parts.append(f"NVIDIA GPUs {listed} (as the driver lists them{shown}; {usable})")
    if sys.platform == "darwin" and platform.machine() == "arm64":
        parts.append("mps if this torch build has it (Apple silicon)")
    return ", ".join(parts)


def environment_facts() -> dict[str, str]:
    """Python, torch, Qt and device facts as a flat mapping (torch is not imported)."""
    build = torch_build()
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "torch": build.get("__version__") or "not installed",
        "cuda": build.get("cuda") or (f"none (ROCm/HIP {build['hip']})" if build.get("hip") else "none"),
        "PySide6": package_version("PySide6-Essentials"),
        "pyqtgraph": package_version("pyqtgraph"),
        "devices": devices_text(build, nvidia_gpus()),
    }


def environment_summary() -> str:
    """One ``key: value`` line per fact."""
    return "\n".join(f"{k}: {v}" for k, v in environment_facts().items())
