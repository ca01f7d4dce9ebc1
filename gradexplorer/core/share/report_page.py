"""The report page's fixed parts, put inline into every report (the file needs no network):
``resources/report/report.css`` and ``report.js`` (smoothing, CSV downloads, sortable tables)."""

from __future__ import annotations

from functools import lru_cache

from gradexplorer.resources import resource_path


@lru_cache(maxsize=1)
def page_assets() -> tuple[str, str]:
    """``(style sheet, script)``."""
    folder = resource_path("report")
    return ((folder / "report.css").read_text(encoding="utf-8"),
            (folder / "report.js").read_text(encoding="utf-8"))
