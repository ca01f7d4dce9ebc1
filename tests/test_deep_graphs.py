"""Deep autograd graphs never overflow the native stack: every accepted size works."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gradexplorer.core.graph.deep_stack import DEEP_STACK_BYTES, run_with_deep_stack


def test_the_issue_case_of_20000_blocks_is_drawn(tmp_path):
    """15,000 blocks used to die with a segmentation fault on the main thread's 8 MB stack."""
    proc = subprocess.run(
        [sys.executable, "-m", "gradexplorer", "graph", "--model", "example:deep:blocks=20000",
         "--out", str(tmp_path / "deep.json"), "--no-saved"],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert "120,009 nodes" in proc.stdout


def test_run_with_deep_stack_returns_and_raises_like_a_call():
    assert run_with_deep_stack(lambda: 41 + 1) == 42
    with pytest.raises(KeyError, match="boom"):
        run_with_deep_stack(lambda: {}["boom"])
    assert DEEP_STACK_BYTES >= 1 << 30


def test_the_apps_training_thread_has_the_deep_stack(qtbot):
    from gradexplorer.gui.session.controller import SessionController

    controller = SessionController()
    try:
        assert controller._worker.stackSize() == DEEP_STACK_BYTES
    finally:
        controller.close()
