"""Add gradexplorer to the desktop's application menu for a pip install (per user, freedesktop).

    python -m gradexplorer.desktop_entry            # install into ~/.local/share
    python -m gradexplorer.desktop_entry --remove   # take it out again
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from gradexplorer.core.files.atomic_file import write_atomic
from gradexplorer.resources import resource_path, resources_dir

APP_ID = "io.github.gradexplorer.GradExplorer"
DESKTOP_NAME = f"{APP_ID}.desktop"
METAINFO_NAME = f"{APP_ID}.metainfo.xml"
ICON_SIZES = (16, 32, 48, 64, 128, 256, 512)
EXEC_RESERVED = set(' \t\n"\'\\><~|&;$*?#()`')


def desktop_source(name: str) -> Path:
    """A shipped desktop file: ``resources/desktop`` in a wheel, ``packaging/`` in a checkout."""
    for candidate in (resource_path("desktop", name), resources_dir().parent / "packaging" / name):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"{name} is missing from this installation")


def data_home() -> Path:
    """``$XDG_DATA_HOME`` or ``~/.local/share``."""
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")


def launch_command() -> list[str]:
    """How the menu entry starts the app: the console script if found, else ``python -m``."""
    beside_python = str(Path(sys.executable).parent)
    script = shutil.which("gradexplorer") or shutil.which("gradexplorer", path=beside_python)
    return [script] if script else [sys.executable, "-m", "gradexplorer"]


def exec_quote(arg: str) -> str:
    """One argument quoted as the Desktop Entry spec's ``Exec`` key wants it."""
    if not arg or EXEC_RESERVED & set(arg):
        escaped = "".join("\\" + c if c in '"`$\\' else c for c in arg)
        return f'"{escaped}"'.replace("%", "%%")
    return arg.replace("%", "%%")


def desktop_text(command: list[str]) -> str:
    """The shipped desktop entry with ``Exec`` pointing at ``command``."""
    lines = desktop_source(DESKTOP_NAME).read_text(encoding="utf-8").splitlines()
    exec_line = "Exec=" + " ".join(exec_quote(a) for a in command)
    return "\n".join(exec_line if line.startswith("Exec=") else line for line in lines) + "\n"


def planned_files(home: Path) -> dict[Path, Path | str]:
    """Target path -> source file (or text) for every file the install writes."""
    plan: dict[Path, Path | str] = {
        home / "applications" / DESKTOP_NAME: desktop_text(launch_command()),
        home / "metainfo" / METAINFO_NAME: desktop_source(METAINFO_NAME),
        home / "icons" / "hicolor" / "scalable" / "apps" / "gradexplorer.svg":
            resource_path("icons", "gradexplorer.svg"),
    }
    for size in ICON_SIZES:
        sized = f"{size}x{size}"
        target = home / "icons" / "hicolor" / sized / "apps" / "gradexplorer.png"
        plan[target] = resource_path("icons", "hicolor", sized, "apps", "gradexplorer.png")
    return plan


def install_file(target: Path, source: Path | str) -> None:
    """Copy ``source`` (a file, or text) to ``target`` atomically, making its folder."""
    target.parent.mkdir(parents=True, exist_ok=True)
    data = source.read_bytes() if isinstance(source, Path) else source.encode("utf-8")
    write_atomic(target, data)


def install(home: Path | None = None) -> list[Path]:
    """Install the menu entry, icons and metainfo for this user; returns the files written."""
    plan = planned_files(home or data_home())
    for target, source in plan.items():
        install_file(target, source)
    return list(plan)


def remove(home: Path | None = None) -> list[Path]:
    """Delete what ``install`` wrote; returns the files removed."""
    removed = [p for p in planned_files(home or data_home()) if p.is_file()]
    for path in removed:
        path.unlink()
    return removed


def main(argv: list[str] | None = None) -> int:
    """Command line of ``python -m gradexplorer.desktop_entry``."""
    parser = argparse.ArgumentParser(prog="python -m gradexplorer.desktop_entry", description=__doc__)
    parser.add_argument("--remove", action="store_true", help="remove the menu entry and icons")
    args = parser.parse_args(argv)
    paths = remove() if args.remove else install()
    verb = "removed" if args.remove else "installed"
    for path in paths:
        print(f"{verb} {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
