"""The wheel carries the assets and the console script; the desktop files validate."""

import configparser
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path
from xml.etree import ElementTree

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGING = ROOT / "packaging"
APP_ID = "io.github.gradexplorer.GradExplorer"
DESKTOP = PACKAGING / f"{APP_ID}.desktop"
METAINFO = PACKAGING / f"{APP_ID}.metainfo.xml"
ICON_SIZES = (16, 32, 48, 64, 128, 256, 512)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built from this checkout with hatchling's own builder."""
    builders = pytest.importorskip("hatchling.builders.wheel", reason="hatchling is not installed")
    out = tmp_path_factory.mktemp("dist")
    built = list(builders.WheelBuilder(str(ROOT)).build(directory=str(out), versions=["standard"]))
    assert len(built) == 1
    return Path(built[0])


@pytest.fixture(scope="module")
def wheel_names(wheel) -> set[str]:
    with zipfile.ZipFile(wheel) as zf:
        return set(zf.namelist())


def checkout_resources() -> list[str]:
    """Every asset under the checkout's resources/, as its path inside the wheel."""
    return sorted(
        "gradexplorer/resources/" + p.relative_to(ROOT / "resources").as_posix()
        for p in (ROOT / "resources").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )


def test_wheel_carries_every_resource(wheel_names):
    expected = checkout_resources()
    assert "gradexplorer/resources/icons/gradexplorer.svg" in expected
    missing = [name for name in expected if name not in wheel_names]
    assert not missing, f"missing from the wheel: {missing}"


def test_wheel_carries_icons_data_and_desktop_files(wheel_names):
    res = "gradexplorer/resources"
    needed = [f"{res}/icons/hicolor/{n}x{n}/apps/gradexplorer.png" for n in ICON_SIZES]
    needed += [f"{res}/desktop/{DESKTOP.name}", f"{res}/desktop/{METAINFO.name}"]
    needed += ["gradexplorer/core/model/examples/data/digits.npz", "gradexplorer/resources.py"]
    if (ROOT / "resources" / "style.qss").exists():
        needed.append(f"{res}/style.qss")
    assert [name for name in needed if name not in wheel_names] == []


def test_wheel_declares_the_console_script(wheel, wheel_names):
    entry_points = next(n for n in wheel_names if n.endswith(".dist-info/entry_points.txt"))
    parser = configparser.ConfigParser()
    with zipfile.ZipFile(wheel) as zf:
        parser.read_string(zf.read(entry_points).decode())
    assert parser["console_scripts"]["gradexplorer"] == "gradexplorer.cli:main"


def test_installed_wheel_finds_its_resources(wheel, tmp_path):
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    code = "import gradexplorer.resources as r; print(r.resource_path('icons', 'gradexplorer.svg'))"
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    found = Path(proc.stdout.strip())
    assert found == site / "gradexplorer" / "resources" / "icons" / "gradexplorer.svg"
    assert found.is_file()


@pytest.mark.parametrize("size", ICON_SIZES)
def test_icon_png_has_its_size(size):
    png = ROOT / "resources" / "icons" / "hicolor" / f"{size}x{size}" / "apps" / "gradexplorer.png"
    header = png.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n" and header[12:16] == b"IHDR"
    assert struct.unpack(">II", header[16:24]) == (size, size)


def test_desktop_entry_names_icon_and_command():
    entry = configparser.ConfigParser(interpolation=None)
    entry.optionxform = str
    entry.read(DESKTOP)
    section = entry["Desktop Entry"]
    assert section["Icon"] == "gradexplorer"
    assert (ROOT / "resources" / "icons" / f"{section['Icon']}.svg").is_file()
    assert section["Exec"].split()[0] == "gradexplorer"


def test_metainfo_matches_desktop_entry():
    component = ElementTree.parse(METAINFO).getroot()
    assert component.findtext("id") == APP_ID
    assert component.findtext("launchable") == DESKTOP.name
    assert component.findtext("provides/binary") == "gradexplorer"
    from gradexplorer import __version__

    assert component.find("releases/release").get("version") == __version__


def run_validator(*command: str) -> subprocess.CompletedProcess:
    if shutil.which(command[0]) is None:
        pytest.skip(f"{command[0]} is not installed (apt-get install desktop-file-utils appstream)")
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def test_desktop_entry_validates():
    proc = run_validator("desktop-file-validate", str(DESKTOP))
    assert proc.returncode == 0 and "error" not in proc.stdout.lower(), proc.stdout + proc.stderr


def test_metainfo_validates():
    proc = run_validator("appstreamcli", "validate", "--no-net", str(METAINFO))
    assert proc.returncode == 0, proc.stdout + proc.stderr
