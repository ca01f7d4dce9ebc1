"""The test harness's own rules that a reading of the tests can check: every test passes from
any working directory (a file of the checkout is named from ``ROOT``/``__file__``, or the test
runs its command with ``cwd=ROOT`` / ``chdir(ROOT)`` on purpose); a fixture of conftest.py has
no twin in a test module."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPO_PATH = re.compile(r"^(tests|docs|bench|resources|examples)/\S+\.\w+(:\w+)?$")
FROM_ROOT = re.compile(r"cwd=ROOT\b|chdir\(ROOT\)")


def cwd_relative_paths(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of each string in ``source`` that names a file of the checkout relative
    to the working directory: not the right side of a ``/`` and not in a function (decorators
    included) that runs from ``ROOT`` on purpose."""
    tree = ast.parse(source)
    joined = {id(n.right) for n in ast.walk(tree) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div)}
    pinned = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and FROM_ROOT.search(
                ast.get_source_segment(source, node) or ""):
            pinned |= {id(n) for n in ast.walk(node)}
            pinned |= {id(n) for d in node.decorator_list for n in ast.walk(d)}
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                  and n.body and isinstance(n.body[0], ast.Expr)}
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and REPO_PATH.match(n.value)
            and id(n) not in joined | pinned | docstrings]


def test_the_check_finds_a_path_relative_to_the_working_directory():
    bad = 'def test_x(qtbot):\n    open_model(qtbot, w, "tests/data/nan_sqrt_model.py:build")\n'
    assert cwd_relative_paths(bad) == [(2, "tests/data/nan_sqrt_model.py:build")]
    good = ('def test_y(monkeypatch):\n    monkeypatch.chdir(ROOT)\n    open_model("examples/a.py:build")\n'
            'def test_z():\n    run(ROOT / "docs/examples/spike_hunt.py")\n')
    assert cwd_relative_paths(good) == []


def test_no_test_names_a_file_relative_to_the_working_directory():
    found = {p.name: hits for p in sorted((ROOT / "tests").glob("*.py"))
             if (hits := cwd_relative_paths(p.read_text(encoding="utf-8")))}
    assert not found, f"name these from ROOT or Path(__file__): {found}"


def fixtures(source: str) -> set[str]:
    """Names of the functions decorated with ``pytest.fixture`` in ``source``."""
    def is_fixture(d):
        target = d.func if isinstance(d, ast.Call) else d
        return isinstance(target, ast.Attribute) and target.attr == "fixture"
    return {n.name for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.FunctionDef) and any(is_fixture(d) for d in n.decorator_list)}


def test_no_test_module_redefines_a_conftest_fixture():
    shared = fixtures((ROOT / "tests" / "conftest.py").read_text(encoding="utf-8"))
    assert {"make_window", "one_thread", "run_cli"} <= shared
    twins = {p.name: twin for p in sorted((ROOT / "tests").glob("test_*.py"))
             if (twin := shared & fixtures(p.read_text(encoding="utf-8")))}
    assert not twins, f"use conftest.py's fixtures: {twins}"
