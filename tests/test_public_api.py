"""Every name docs/api.md lists is importable from gradexplorer, and the documented example runs."""

import re
import subprocess
import sys
from pathlib import Path

import gradexplorer

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "api.md").read_text()


NAMESPACES = ("session", "hooks", "graph", "diagnose", "runs")


def documented_names() -> set[str]:
    """The top-level names the tables list (rows without a namespace prefix)."""
    return set(re.findall(r"^\| `(\w+)(?=[`(])", DOC, flags=re.M))


def documented_in(namespace: str) -> set[str]:
    """The names the tables list as ``namespace.name``."""
    return set(re.findall(rf"^\| `{namespace}\.(\w+)", DOC, flags=re.M))


def test_every_documented_name_is_public_and_importable():
    names = documented_names()
    assert {"watch", "open_run", "Run", "trace", "read_snapshot", "compare_snapshots",
            "write_report", "UserError", "StepGradients"} <= names
    for name in names:
        assert name in gradexplorer.__all__, name
        assert getattr(gradexplorer, name) is not None


def test_every_public_name_is_documented():
    assert set(gradexplorer.__all__) - {"__version__"} == documented_names()


def test_the_top_level_tells_the_users_stories_in_at_most_16_names():
    assert len(gradexplorer.__all__) <= 16


def test_every_namespace_name_is_documented_and_importable():
    import importlib

    for namespace in NAMESPACES:
        module = importlib.import_module(f"gradexplorer.{namespace}")
        assert getattr(gradexplorer, namespace) is module
        listed = documented_in(namespace)
        assert listed, namespace
        # documented with its prefix, or at the top level (``trace`` is in ``graph`` too)
        assert set(module.__all__) - listed <= set(gradexplorer.__all__), namespace
        assert listed <= set(module.__all__), namespace
        for name in module.__all__:
            assert getattr(module, name) is not None, f"{namespace}.{name}"
        assert f"`gradexplorer.{namespace}`" in DOC


def test_an_old_top_level_name_still_works_and_says_where_it_went():
    import pytest

    from gradexplorer.session import SessionConfig

    with pytest.warns(DeprecationWarning, match=r"gradexplorer\.session\.SessionConfig"):
        old = gradexplorer.SessionConfig
    assert old is SessionConfig
    with pytest.raises(AttributeError, match="no attribute 'NoSuchName'"):
        gradexplorer.NoSuchName  # noqa: B018


def test_import_gradexplorer_does_not_import_torch():
    code = "import sys, gradexplorer; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_documented_example_runs(tmp_path):
    example = re.search(r"## Example\n\n```python\n(.*?)```", DOC, flags=re.S).group(1)
    proc = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.split()
    assert lines[0] == "1" and (tmp_path / "lenet.svg").stat().st_size > 1000


def test_the_docs_teach_only_public_names():
    """Code in the user docs imports from ``gradexplorer`` (or its integrations), never the
    internal ``gradexplorer.core`` modules (docs/architecture.md maps those on purpose)."""
    internal = re.compile(r"^\s*(from|import)\s+gradexplorer\.core\b", flags=re.M)
    taught = {p.name: internal.findall(p.read_text(encoding="utf-8"))
              for p in (ROOT / "docs").glob("*.md") if p.name != "architecture.md"}
    assert {"graph.md", "hooks.md", "gradients.md", "api.md"} <= set(taught)
    assert not {name: hits for name, hits in taught.items() if hits}
    assert not internal.findall((ROOT / "README.md").read_text(encoding="utf-8"))
    scripts = {p.name: internal.findall(p.read_text(encoding="utf-8"))
               for p in (ROOT / "docs" / "examples").glob("*.py")}  # the docs' runnable examples
    assert "spike_hunt.py" in scripts and not {name: hits for name, hits in scripts.items() if hits}


def test_the_docs_name_only_hook_registry_members_that_exist():
    """``registry.<name>`` in the user docs (not a path ending in ``registry.py``) is a member of a
    HookRegistry (``listeners``, the list psygnal's ``event`` replaced, stayed in docs/hooks.md
    after it was gone)."""
    from torch import nn

    registry = gradexplorer.hooks.HookRegistry(nn.Sequential(nn.Linear(2, 2)))
    named = {m for p in [*(ROOT / "docs").glob("*.md"), ROOT / "README.md"]
             for m in re.findall(r"(?<![/\w.])registry\.([A-Za-z_]\w*)", p.read_text(encoding="utf-8"))}
    assert {"attach", "install", "event"} <= named
    assert not {m for m in named if not hasattr(registry, m)}
