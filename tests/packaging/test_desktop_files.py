"""The desktop integration files in packaging/: valid for the tools desktops use, and agreeing
with each other (one application id, one icon name, the sizes the hicolor theme looks up)."""

from __future__ import annotations

import configparser
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from workbench.paths import REPO_ROOT

PACKAGING = REPO_ROOT / "packaging"
APP_ID = "io.github.moeworkbench.Workbench"
DESKTOP = PACKAGING / f"{APP_ID}.desktop"
METAINFO = PACKAGING / f"{APP_ID}.metainfo.xml"
ICONS = PACKAGING / "icons"


def test_the_desktop_entry_is_valid_and_names_the_icon():
    entry = configparser.ConfigParser(interpolation=None)
    entry.optionxform = str  # keys are case-sensitive
    entry.read(DESKTOP)
    group = entry["Desktop Entry"]
    assert group["Type"] == "Application"
    assert group["Exec"].split()[0] == "workbench"
    assert group["Icon"] == APP_ID
    assert group["Categories"].endswith(";")
    if shutil.which("desktop-file-validate"):  # Debian: desktop-file-utils
        proc = subprocess.run(["desktop-file-validate", str(DESKTOP)], capture_output=True,
                              text=True)
        assert proc.returncode == 0 and "error" not in proc.stdout, proc.stdout


def test_the_metainfo_is_valid_appstream_for_the_same_application():
    root = ET.parse(METAINFO).getroot()
    assert root.tag == "component" and root.get("type") == "desktop-application"
    assert root.findtext("id") == APP_ID
    assert root.find("launchable").text == DESKTOP.name
    assert root.findtext("icon") == APP_ID
    assert root.findtext("project_license") == "Apache-2.0"
    for required in ("name", "summary", "metadata_license", "description", "releases",
                     "content_rating"):
        assert root.find(required) is not None, required
    if shutil.which("appstreamcli"):  # Debian: appstream
        proc = subprocess.run(["appstreamcli", "validate", "--no-net", "--explain",
                               str(METAINFO)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "W:" not in proc.stdout and "E:" not in proc.stdout, proc.stdout


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", path
    return struct.unpack(">II", data[16:24])


def test_the_icon_has_an_svg_and_every_png_size_rendered_from_it():
    svg = ET.parse(ICONS / f"{APP_ID}.svg").getroot()
    assert svg.tag.endswith("svg") and svg.get("viewBox") == "0 0 256 256"
    sizes = sorted(int(p.stem) for p in (ICONS / "png").glob("*.png"))
    assert {16, 32, 48, 64, 128, 256, 512} <= set(sizes)
    for size in sizes:
        assert _png_size(ICONS / "png" / f"{size}.png") == (size, size)
    # Rendered, not blank: the largest has colour (the lit experts) and transparency (the corners).
    from PySide6.QtGui import QImage

    image = QImage(str(ICONS / "png" / "512.png"))
    assert image.pixelColor(2, 2).alpha() == 0
    assert image.pixelColor(256, 256).alpha() == 255
