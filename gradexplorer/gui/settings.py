"""What the app remembers between launches (QSettings): window geometry, last model, recent
models and snapshots."""

from __future__ import annotations

from PySide6.QtCore import QByteArray, QSettings

ORGANIZATION, APPLICATION = "gradexplorer", "gradexplorer"
RECENT_MAX = 8  # entries in each recent list
RECENT_KINDS = ("models", "snapshots")


class AppSettings:
    """Typed access to the persistent settings."""

    def __init__(self, settings: QSettings | None = None) -> None:
        self._s = settings or QSettings(ORGANIZATION, APPLICATION)

    def geometry(self) -> QByteArray | None:
        """Saved main-window geometry."""
        value = self._s.value("window/geometry")
        return value if isinstance(value, QByteArray) else None

    def window_state(self) -> QByteArray | None:
        """Saved dock and toolbar arrangement."""
        value = self._s.value("window/state")
        return value if isinstance(value, QByteArray) else None

    def save_window(self, geometry: QByteArray, state: QByteArray) -> None:
        self._s.setValue("window/geometry", geometry)
        self._s.setValue("window/state", state)

    def last_model(self) -> str | None:
        """The spec of the model opened last."""
        value = self._s.value("model/last")
        return str(value) if value else None

    def set_last_model(self, spec: str) -> None:
        self._s.setValue("model/last", spec)

    def recent(self, kind: str) -> list[str]:
        """The recent ``models`` (specs) or ``snapshots`` (folders), newest first."""
        value = self._s.value(f"recent/{kind}")
        if isinstance(value, str):  # QSettings (INI) gives one entry back as a plain string
            value = [value]
        return [str(v) for v in value or [] if v]

    def add_recent(self, kind: str, entry: str) -> list[str]:
        """Put ``entry`` first in the recent ``kind`` list (once, at most RECENT_MAX kept)."""
        entries = [entry] + [e for e in self.recent(kind) if e != entry]
        self._s.setValue(f"recent/{kind}", entries[:RECENT_MAX])
        return entries[:RECENT_MAX]

    def forget_recent(self, kind: str, entry: str) -> None:
        """Drop ``entry`` from the recent ``kind`` list (it no longer opens)."""
        self._s.setValue(f"recent/{kind}", [e for e in self.recent(kind) if e != entry])

    def last_dir(self) -> str:
        """Folder of the last file dialog."""
        return str(self._s.value("paths/last_dir") or "")

    def set_last_dir(self, path: str) -> None:
        self._s.setValue("paths/last_dir", path)

    def theme(self) -> str:
        """``system`` (follow the desktop), ``light`` or ``dark``."""
        value = str(self._s.value("view/theme") or "system")
        return value if value in ("system", "light", "dark") else "system"

    def set_theme(self, theme: str) -> None:
        self._s.setValue("view/theme", theme)

    def plot_image_size(self) -> tuple[int, int]:
        """``(width in pixels, DPI)`` of saved plot images (default 1600 px at 144 DPI)."""
        try:
            width, dpi = int(self._s.value("export/plot_width") or 1600), int(
                self._s.value("export/plot_dpi") or 144)
        except (TypeError, ValueError):
            return 1600, 144
        return (width if 200 <= width <= 8000 else 1600), (dpi if 36 <= dpi <= 1200 else 144)

    def set_plot_image_size(self, width: int, dpi: int) -> None:
        self._s.setValue("export/plot_width", int(width))
        self._s.setValue("export/plot_dpi", int(dpi))

    def sync(self) -> None:
        self._s.sync()
