"""Listing the callables a Python file defines, without running it (Qt-free)."""

from __future__ import annotations

import ast
from pathlib import Path

PREFERRED = ("build", "make_workload", "workload", "model", "get_model", "create_model")


def list_callables(path: str | Path) -> list[str]:
    """Top-level function and class names in ``path``, likely builders first; [] if unreadable."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return []
    names = [node.name for node in tree.body
             if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_")]
    return sorted(names, key=lambda n: (n not in PREFERRED, PREFERRED.index(n) if n in PREFERRED else 0))
