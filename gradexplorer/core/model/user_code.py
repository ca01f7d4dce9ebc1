"""Importing a user's Python file or module and finding a callable in it, with clear errors."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from gradexplorer.core.messages.errors import UserError, first_line


def user_frame(exc: BaseException) -> str:
    """``file:line`` of the innermost traceback frame outside gradexplorer and torch."""
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        path = frame.filename.replace("\\", "/")
        if "/gradexplorer/" not in path and "/torch/" not in path and "<frozen" not in path:
            return f"{Path(frame.filename).name}:{frame.lineno}"
    return f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"


def import_file(path: str | Path) -> ModuleType:
    """Execute a Python file as a fresh module."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise UserError(f"model file not found: {path}")
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:10]
    name = f"_gradexplorer_user_{path.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserError(f"cannot import {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)  # let the file import its neighbours
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(name, None)
        raise UserError(f"syntax error in {path}:{exc.lineno}: {exc.msg}") from None
    except Exception as exc:  # noqa: BLE001 - whatever the user's file raises
        sys.modules.pop(name, None)
        raise UserError(f"importing {path} failed at {user_frame(exc)}: {first_line(exc)}") from None
    except SystemExit as exc:  # a script's sys.exit() (or argparse) run at import
        sys.modules.pop(name, None)
        raise UserError(exit_at_import(str(path), exc)) from None
    finally:
        if folder in sys.path:
            sys.path.remove(folder)
    return module


def import_dotted(name: str) -> ModuleType:
    """Import ``package.module`` with a clear message when it is absent or broken."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and name.startswith(exc.name):
            raise UserError(f"module {name!r} not found (is it installed or on PYTHONPATH?)") from None
        raise UserError(f"importing {name} failed: {first_line(exc)}") from None
    except SyntaxError as exc:
        raise UserError(f"syntax error in {exc.filename}:{exc.lineno}: {exc.msg}") from None
    except Exception as exc:  # noqa: BLE001
        raise UserError(f"importing {name} failed at {user_frame(exc)}: {first_line(exc)}") from None
    except SystemExit as exc:
        raise UserError(exit_at_import(name, exc)) from None


def exit_at_import(what: str, exc: SystemExit) -> str:
    """One line for a file that called ``sys.exit()`` while being imported."""
    return (f"importing {what} ended the program: it called sys.exit({exc.code!r}) at "
            f"{user_frame(exc)}; keep scripts under if __name__ == '__main__':")


def find_callable(module: ModuleType, attr: str, where: str) -> Callable[..., Any]:
    """``module.attr`` if it exists and is callable."""
    if not attr:
        raise UserError(f"no callable named in {where!r}: use {where}:build")
    obj = getattr(module, attr, None)
    if obj is None:
        found = sorted(
            n for n, v in vars(module).items()
            if callable(v) and not n.startswith("_") and getattr(v, "__module__", None) == module.__name__
        )
        hint = f" (callables there: {', '.join(found)})" if found else ""
        raise UserError(f"{where} has no callable {attr!r}{hint}")
    if not callable(obj):
        raise UserError(f"{where}:{attr} is a {type(obj).__name__}, not a callable")
    return obj


def load_callable(spec: str) -> tuple[Callable[..., Any], str]:
    """``path/to/file.py:name`` or ``package.module:name`` to the callable and a label."""
    target, sep, attr = spec.rpartition(":")
    if not sep or not target:
        raise UserError(
            f"bad model spec {spec!r}: use example:NAME, path/to/file.py:callable "
            "or package.module:callable"
        )
    is_file = target.endswith(".py") or "/" in target or "\\" in target
    module = import_file(target) if is_file else import_dotted(target)
    return find_callable(module, attr, target), f"{target}:{attr}"


def call_user(fn: Callable[..., Any], label: str, *args: Any) -> Any:
    """Call user code; any exception becomes one line with the user's file and line."""
    try:
        return fn(*args)
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise UserError(f"{label} failed at {user_frame(exc)}: {first_line(exc)}") from None
    except SystemExit as exc:
        raise UserError(f"{label} ended the program: it called sys.exit({exc.code!r}) at "
                        f"{user_frame(exc)}") from None
