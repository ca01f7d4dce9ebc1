"""Render the application icon SVG into the PNG sizes a desktop needs (hicolor theme layout).

Run from the repository root after editing ``resources/icons/gradexplorer.svg``:

    QT_QPA_PLATFORM=offscreen python packaging/make_icons.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QGuiApplication, QImage, QPainter  # noqa: E402
from PySide6.QtSvg import QSvgRenderer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SVG = ROOT / "resources" / "icons" / "gradexplorer.svg"
HICOLOR = ROOT / "resources" / "icons" / "hicolor"
SIZES = (16, 32, 48, 64, 128, 256, 512)


def render(renderer: QSvgRenderer, size: int) -> QImage:
    """The SVG drawn into a transparent ``size`` x ``size`` image."""
    image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
    renderer.render(painter)
    painter.end()
    return image


def icon_png_path(size: int) -> Path:
    """Where the ``size`` px rendition lives."""
    return HICOLOR / f"{size}x{size}" / "apps" / "gradexplorer.png"


def main() -> int:
    """Write every PNG rendition; returns the exit status."""
    app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])  # noqa: F841 (keeps Qt alive)
    renderer = QSvgRenderer(str(SVG))
    if not renderer.isValid():
        print(f"cannot read {SVG}", file=sys.stderr)
        return 1
    for size in SIZES:
        target = icon_png_path(size)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp.png")
        if not render(renderer, size).save(str(tmp), "PNG"):
            print(f"cannot write {target}", file=sys.stderr)
            return 1
        os.replace(tmp, target)
        print(target.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
