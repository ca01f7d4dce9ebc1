"""A cheaper answer to the question PySide6 asks of every module imported after it.

For its opt-in ``from __feature__ import snake_case`` switches, PySide6 (``shibokensupport.
feature._mod_uses_pyside``) reads the source of each newly imported module through
``inspect.getsource`` (tokenizing it into ``linecache``) to see whether it names "PySide6". At
the app's start that is every module the window imports and then the ~1,000 modules of torch,
which the training thread imports while the window waits for its first graph: a few tenths of
a second of CPU, and torch's sources kept in memory. The same question is answered here by
reading the file's bytes; a module without a ``.py`` file goes to PySide's own check.
"""

from __future__ import annotations

import sys

FEATURE_MODULE = "shibokensupport.feature"


def scan_imports_cheaply() -> bool:
    """Replace PySide6's per-import source check by a plain read (once; after PySide6 is
    imported). Returns whether the check is the cheap one (False: this PySide6 has none)."""
    import PySide6.QtCore  # noqa: F401 - loads shibokensupport

    feature = sys.modules.get(FEATURE_MODULE)
    own = getattr(feature, "_mod_uses_pyside", None)
    if own is None:
        return False
    if getattr(own, "reads_bytes", False):
        return True

    def uses_pyside(module) -> bool:
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and path.endswith(".py"):
            try:
                with open(path, "rb") as source:
                    return b"PySide6" in source.read()
            except OSError:
                pass
        return own(module)

    uses_pyside.reads_bytes = True
    feature._mod_uses_pyside = uses_pyside
    return True
