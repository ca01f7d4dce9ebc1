"""Where the app's assets (icons, stylesheet, desktop files) live: wheel or checkout."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=1)
def resources_dir() -> Path:
    """``gradexplorer/resources`` inside an installed wheel, else the checkout's ``resources/``."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "resources", here.parent / "resources"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("gradexplorer's resources folder is missing from this installation")


def resource_path(*parts: str) -> Path:
    """Path of one asset, e.g. ``resource_path("icons", "step.svg")``."""
    return resources_dir().joinpath(*parts)
