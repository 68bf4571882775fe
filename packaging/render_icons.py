"""Render the icon's SVG to the PNG sizes desktops look up (hicolor theme), with Qt's renderer.

    QT_QPA_PLATFORM=offscreen .venv/bin/python packaging/render_icons.py

The PNGs are committed (the bundle build needs no renderer); re-run after changing the SVG.
"""

from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

HERE = Path(__file__).resolve().parent / "icons"
SVG = HERE / "io.github.moeworkbench.Workbench.svg"
SIZES = (16, 24, 32, 48, 64, 128, 256, 512)


def render(size: int, renderer: QSvgRenderer, out: Path) -> None:
    image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter)
    painter.end()
    if not image.save(str(out)):
        raise OSError(f"could not write {out}")


def main() -> int:
    app = QGuiApplication.instance() or QGuiApplication(sys.argv)  # noqa: F841 - Qt needs one
    renderer = QSvgRenderer(str(SVG))
    if not renderer.isValid():
        print(f"error: {SVG} is not a valid SVG", file=sys.stderr)
        return 1
    (HERE / "png").mkdir(exist_ok=True)
    for size in SIZES:
        render(size, renderer, HERE / "png" / f"{size}.png")
    print(f"wrote {len(SIZES)} PNGs to {HERE / 'png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
