"""gradexplorer.core works with Qt blocked; the import contract and ruff hold."""

import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

BLOCK_QT_AND_RUN = textwrap.dedent(
    """
    import importlib, pkgutil, sys

    class BlockQt:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {"PySide6", "PyQt5", "PyQt6", "shiboken6", "pyqtgraph", "qtpy"}:
                raise ImportError(f"Qt is blocked: {name}")
            return None

    sys.meta_path.insert(0, BlockQt())
    import gradexplorer.core as core
    for info in pkgutil.walk_packages(core.__path__, "gradexplorer.core."):
        importlib.import_module(info.name)
    from gradexplorer.core.session.engine import TrainingSession, SessionConfig
    from gradexplorer.core.model.spec import load_workload
    session = TrainingSession(load_workload("example:lenet"), SessionConfig(device="cpu"))
    result = session.step()
    assert result.loss > 0 and result.grad_norm > 0
    assert not [m for m in sys.modules if m.startswith(("PySide6", "pyqtgraph", "gradexplorer.gui"))]
    print("core ok without Qt")
    """
)


def test_core_imports_and_steps_with_qt_blocked():
    proc = subprocess.run(
        [sys.executable, "-c", BLOCK_QT_AND_RUN], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "core ok without Qt" in proc.stdout


def test_import_linter_contract_holds():
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    if exe is None:
        pytest.fail("lint-imports (import-linter) is not installed: pip install -e '.[test]'")
    proc = subprocess.run(
        [exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " 0 broken" in proc.stdout


def test_ruff_is_clean():
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "."], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-1000:]


MAX_MODULE_LINES = 400


def test_no_module_is_over_400_lines():
    sizes = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines())
             for folder in ("gradexplorer", "bench", "tests") for p in (ROOT / folder).rglob("*.py")}
    assert sizes and not {p: n for p, n in sizes.items() if n > MAX_MODULE_LINES}


def test_architecture_doc_names_only_modules_that_exist():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    paths = set(re.findall(r"`((?:gui|core|commands)/[\w/]+\.py)`", text))
    assert len(paths) >= 5
    assert not [p for p in paths if not (ROOT / "gradexplorer" / p).exists()]
    names = set(re.findall(r"`([A-Z][a-z][A-Za-z]*[a-z])[`.(]", text))  # classes it names
    names -= {"BackwardHookFunctionBackward"}  # PyTorch's, not ours
    source = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "gradexplorer").rglob("*.py"))
    assert not [n for n in names if f"class {n}" not in source]


def core_part_imports() -> dict[str, set[str]]:
    """For each core subpackage, the other core subpackages its modules import."""
    shared = {"files", "messages"}  # used everywhere: files written safely, what the user is told
    found: dict[str, set[str]] = {}
    for path in (ROOT / "gradexplorer" / "core").glob("*/**/*.py"):
        part = path.relative_to(ROOT / "gradexplorer" / "core").parts[0]
        if part in shared:
            continue
        text = path.read_text(encoding="utf-8")
        names = set(re.findall(r"^\s*(?:from|import) gradexplorer\.core\.(\w+)", text, re.M))
        found.setdefault(part, set()).update(names - shared - {part})
    return found


def test_architecture_doc_says_which_core_part_imports_which():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    documented = {m[0]: set(re.findall(r"`core\.(\w+)`", m[1]))
                  for m in re.findall(r"^\| `core\.(\w+)` \| ([^|]*) \|", text, re.M)}
    assert documented == core_part_imports()


def qt_free_contract_sources() -> set[str]:
    import tomllib
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    return {m for c in contracts["contracts"] if "PySide6" in c.get("forbidden_modules", ())
            for m in c["source_modules"] if m.startswith("gradexplorer.gui")}


def test_every_qt_free_gui_module_is_under_the_qt_free_contract():
    """A GUI module that imports no Qt, directly or through the GUI modules it imports (lazily
    too), is covered by the contract that keeps it so (issue 20: none left outside it)."""
    import ast
    qt = {"PySide6", "shiboken6", "pyqtgraph"}
    imports: dict[str, set[str]] = {}
    for path in (ROOT / "gradexplorer" / "gui").rglob("*.py"):
        if path.name == "__init__.py":
            continue
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        imports[name] = found
    uses_qt: dict[str, bool] = {}

    def needs_qt(name: str, seen: frozenset = frozenset()) -> bool:
        if name not in uses_qt:
            found = imports[name]
            uses_qt[name] = any(m.split(".")[0] in qt for m in found) or any(
                needs_qt(m, seen | {name}) for m in found if m in imports and m not in seen)
        return uses_qt[name]

    covered = qt_free_contract_sources()
    qt_free = {n for n in imports if not needs_qt(n)}
    assert len(qt_free) >= 10 and "gradexplorer.gui.training.run_buffer" in qt_free
    left_out = [n for n in qt_free if not any(n == c or n.startswith(c + ".") for c in covered)]
    assert not left_out, left_out
