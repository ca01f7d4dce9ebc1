"""Scripts of this repository (bench/, docs/examples/) loaded as modules by tests, by path."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_script(*parts: str):
    """The script at ``ROOT/parts...`` run as a module (its ``if __name__ == "__main__"`` not)."""
    path = ROOT.joinpath(*parts)
    spec = importlib.util.spec_from_file_location(f"script_{path.parent.name}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
