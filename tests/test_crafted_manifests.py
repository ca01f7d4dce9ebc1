"""Crafted manifests (digest recomputed after the edit) give one line naming the field."""

from __future__ import annotations

import json
import shutil

import pytest
from grad_helpers import make_session

from gradexplorer.core.snapshot import format as F
from gradexplorer.core.snapshot import write_snapshot


@pytest.fixture(scope="module")
def snapshot_dir(tmp_path_factory):
    session = make_session("example:mlp")
    session.step()
    return write_snapshot(tmp_path_factory.mktemp("snap"), session,
                          hooks=[{"module": "fc1", "action": "observe", "calls": 1}])


def crafted(source, target, edit) -> str:
    """A copy of ``source`` whose manifest ``edit(manifest)`` changed, digest recomputed."""
    shutil.copytree(source, target)
    manifest = json.loads((target / F.MANIFEST_FILE).read_text())
    edit(manifest)
    manifest["manifest_sha256"] = F.manifest_digest(manifest)
    (target / F.MANIFEST_FILE).write_text(json.dumps(manifest))
    return str(target)


def _set(path: str, value):
    def edit(manifest):
        *parents, last = path.split(".")
        node = manifest
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[int(last) if isinstance(node, list) else last] = value
    return edit


def _first_histogram(edit_hist):
    def edit(manifest):
        edit_hist(next(p for p in manifest["parameters"] if p["histogram"])["histogram"])
    return edit


CASES = {
    "stats": (_set("parameters.0.stats", "abc"), "parameters[0].stats"),
    "norm": (_set("parameters.0.stats.norm", "very big"), "parameters[0].stats.norm"),
    "count": (_set("parameters.0.stats.nan_count", 10**30), "parameters[0].stats.nan_count"),
    "bin count": (_first_histogram(lambda h: h["counts"].__setitem__(0, 10**30)), "counts[0]"),
    "edges": (_first_histogram(lambda h: h.__setitem__("edges", "abc")), "histogram.edges"),
    "2 counts": (_first_histogram(lambda h: h.__setitem__("counts", [1, 2])), "histogram.edges"),
    "step": (_set("step", "abc"), "field step"),
    "shape": (_set("parameters.0.shape", ["a"]), "parameters[0].shape[0]"),
    "numel": (_set("parameters.0.numel", 7), "parameters[0].numel"),
    "has_grad": (_set("parameters.0.has_grad", "yes"), "parameters[0].has_grad"),
    "bytes": (lambda m: m["files"][F.GRADIENTS_FILE].__setitem__("bytes", "x"), "bytes"),
    "hooks": (_set("hooks", "abc"), "field hooks"),
    "parameters": (_set("parameters", {"a": 1}), "field parameters"),
    "total": (_set("total_numel", -5), "total_numel"),
    "name": (_set("parameters.0.name", "fc1\x1b[2J"), "control characters"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_crafted_field_gives_one_line_from_inspect_and_compare(run_cli, snapshot_dir, tmp_path, case):
    edit, field = CASES[case]
    bad = crafted(snapshot_dir, tmp_path / "bad", edit)
    for argv in (("inspect", bad), ("compare", snapshot_dir, bad), ("compare", bad, snapshot_dir)):
        code, out, err = run_cli(*argv)
        assert code == 2, (case, argv, out, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in out + err, err
        assert field in lines[0] and "\x1b" not in lines[0], lines[0]


def test_open_refuses_a_crafted_manifest_in_one_line(run_cli, snapshot_dir, tmp_path):
    bad = crafted(snapshot_dir, tmp_path / "bad", CASES["edges"][0])
    code, _, err = run_cli("open", bad, "--screenshot", tmp_path / "x.png")
    assert code == 2 and err.count("\n") == 1 and "histogram.edges" in err


def test_terminal_escapes_in_text_fields_are_printed_escaped(run_cli, snapshot_dir, tmp_path):
    def edit(manifest):
        manifest["model"] = "evil\x1b[2J\x07model"
        manifest["hooks"] = [{"module": "fc1\x1b]0;title\x07", "action": "observe", "calls": 1}]
    code, out, err = run_cli("inspect", crafted(snapshot_dir, tmp_path / "esc", edit))
    assert code == 0, err
    assert "\x1b" not in out and "\x07" not in out
    assert "evil\\x1b[2J\\x07model" in out and "fc1\\x1b]0;title\\x07" in out


@pytest.mark.parametrize("text", ['{"format": ' + "[" * 100_000 + "]" * 100_000 + "}",
                                  '{"a": "' + "[" * 1000 + '"}'])
def test_a_deeply_nested_manifest_is_one_line(run_cli, snapshot_dir, tmp_path, text):
    bad = tmp_path / "deep"
    shutil.copytree(snapshot_dir, bad)
    (bad / F.MANIFEST_FILE).write_text(text)
    code, out, err = run_cli("inspect", bad)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in out + err, err
    expected = "nested too deep (100,001 levels" if text.count("[") > 1000 else "not a gradexplorer"
    assert expected in err, err  # brackets inside a string are text, not nesting
