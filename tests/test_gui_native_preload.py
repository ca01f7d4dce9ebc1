"""gui/native_preload.py (issue 22 item 10, start-up): torch's main native library is loaded on a
thread of its own, without importing torch, and only with a core to spare; torch's own import
then uses the loaded library."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gradexplorer.gui import native_preload
from gradexplorer.gui.native_preload import core_to_spare, preload_torch_library, torch_library

ROOT = Path(__file__).resolve().parents[1]

# In a fresh process: whether the library is mapped before and after the preload, whether torch
# was imported by it, and torch's import working on the preloaded library afterwards.
PRELOAD = r"""
import json, sys
from gradexplorer.gui import native_preload

def mapped():
    with open("/proc/self/maps") as maps:
        return native_preload.torch_library().name in maps.read()

native_preload.core_to_spare = lambda: True  # this test's machine may be busy
before = mapped()
thread = native_preload.preload_torch_library()
thread.join()
after, imported = mapped(), "torch" in sys.modules
import torch
print(json.dumps([before, thread.name, thread.daemon, after, imported, float(torch.ones(3).sum())]))
"""


def test_torch_library_is_found_without_importing_torch():
    path = torch_library()
    assert path is not None and path.is_file()
    assert path.name in native_preload.LIBRARY.values()
    import torch

    assert path.parent == Path(torch.__file__).parent / "lib"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_the_library_is_loaded_on_its_own_thread_and_torch_imports_on_it(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", PRELOAD], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    before, name, daemon, after, imported, total = json.loads(done.stdout.strip().splitlines()[-1])
    assert before is False and after is True  # loaded by the preload thread
    assert name == "torch-preload" and daemon is True  # never keeps the app from exiting
    assert imported is False  # torch's Python side not run early
    assert total == 3.0


@pytest.mark.parametrize(("cores", "load", "spare"), [
    (2, 0.7, True), (2, 1.4, True), (2, 1.6, False), (2, 5.0, False), (1, 0.0, False), (8, 6.0, True),
])
def test_a_core_is_spared_only_under_a_light_load(monkeypatch, cores, load, spare):
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(cores)), raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    assert core_to_spare() is spare


def test_no_preload_without_a_spare_core_or_once_torch_is_imported(monkeypatch):
    monkeypatch.setattr(native_preload, "core_to_spare", lambda: False)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert preload_torch_library() is None  # a busy machine: the window keeps its core
    monkeypatch.setattr(native_preload, "core_to_spare", lambda: True)
    monkeypatch.setitem(sys.modules, "torch", sys)  # (any module: torch imported already)
    assert preload_torch_library() is None
