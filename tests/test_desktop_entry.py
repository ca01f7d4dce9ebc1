"""``python -m gradexplorer.desktop_entry`` puts a working menu entry and icons under XDG_DATA_HOME."""

import configparser
import shutil
import subprocess

import pytest

from gradexplorer import desktop_entry
from gradexplorer.desktop_entry import DESKTOP_NAME, ICON_SIZES, exec_quote


def read_entry(path):
    entry = configparser.ConfigParser(interpolation=None)
    entry.optionxform = str
    entry.read(path)
    return entry["Desktop Entry"]


def test_install_writes_entry_icons_and_metainfo(tmp_path, monkeypatch):
    monkeypatch.setattr(desktop_entry, "launch_command", lambda: ["/opt/gx dir/bin/gradexplorer"])
    written = desktop_entry.install(tmp_path)
    desktop = tmp_path / "applications" / DESKTOP_NAME
    assert desktop in written and desktop.is_file()
    assert read_entry(desktop)["Exec"] == '"/opt/gx dir/bin/gradexplorer"'
    for size in ICON_SIZES:
        assert (tmp_path / "icons" / "hicolor" / f"{size}x{size}" / "apps" / "gradexplorer.png").is_file()
    assert (tmp_path / "icons" / "hicolor" / "scalable" / "apps" / "gradexplorer.svg").is_file()
    assert (tmp_path / "metainfo" / f"{desktop_entry.APP_ID}.metainfo.xml").is_file()
    if shutil.which("desktop-file-validate"):
        proc = subprocess.run(["desktop-file-validate", str(desktop)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout


def test_remove_deletes_what_install_wrote(tmp_path):
    written = desktop_entry.install(tmp_path)
    removed = desktop_entry.remove(tmp_path)
    assert sorted(removed) == sorted(written)
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_main_uses_xdg_data_home(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert desktop_entry.main([]) == 0
    assert f"installed {tmp_path / 'applications' / DESKTOP_NAME}" in capsys.readouterr().out
    command = read_entry(tmp_path / "applications" / DESKTOP_NAME)["Exec"]
    assert "gradexplorer" in command


@pytest.mark.parametrize(
    ("arg", "quoted"),
    [
        ("/usr/bin/gradexplorer", "/usr/bin/gradexplorer"),
        ("/home/a b/gx", '"/home/a b/gx"'),
        ("/x/$HOME/gx", '"/x/\\$HOME/gx"'),
        ("/x/50%/gx", "/x/50%%/gx"),
    ],
)
def test_exec_quote_follows_the_desktop_entry_spec(arg, quoted):
    assert exec_quote(arg) == quoted
