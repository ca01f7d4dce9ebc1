"""gui/pyside_scan.py: PySide6 still learns which modules name PySide6 (its feature switches'
default), but from the file's bytes: no source tokenized into linecache for every import
(torch's ~1,000 modules at the app's start)."""

from __future__ import annotations

import linecache
import sys

from gradexplorer.gui.app import application
from gradexplorer.gui.pyside_scan import FEATURE_MODULE, scan_imports_cheaply


def test_modules_imported_after_the_app_starts_are_checked_from_their_bytes(tmp_path, monkeypatch):
    application()
    assert scan_imports_cheaply()  # the cheap check is in place (and installing it twice is fine)
    (tmp_path / "gx_uses_qt.py").write_text("def widget():\n    import PySide6.QtWidgets\n")
    (tmp_path / "gx_plain.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("gx_uses_qt", "gx_plain"):
        sys.modules.pop(name, None)
        __import__(name)  # the import statement: PySide6 watches builtins.__import__
    features = sys.modules[FEATURE_MODULE].pyside_feature_dict
    assert features["gx_uses_qt"] == 0 and features["gx_plain"] == -1  # PySide's own answers
    for name in ("gx_uses_qt", "gx_plain"):  # without reading them into linecache
        assert str(tmp_path / f"{name}.py") not in linecache.cache
        del sys.modules[name]
