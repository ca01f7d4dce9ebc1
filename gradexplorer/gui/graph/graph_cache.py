"""The first graph of a model kept from its last open, drawn at the next start before torch loads.

Once the app has traced and laid out a model's first view, what the view draws (node ids,
kinds, labels, tooltips, modules, parameters, positions, edges) is written as JSON to the
user's cache folder, keyed by the model spec, its options, the layout, a hash of the model's
source (the examples' files, or the ``file.py`` of a ``file.py:callable`` spec), gradexplorer's
version and torch's (read from torch's ``version.py``, not imported). At the next start the
window draws that entry at once; the live trace replaces it (``gui/window/cached_first_graph.py``).
The default example's entry ships in the package's resources (``graphs/``), so a first launch
draws it too; tests/test_graph_cache.py checks it equals a live trace and layout with the
installed torch. Qt-free, and no torch or networkx: this runs on the GUI thread at start-up.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from gradexplorer._version import __version__
from gradexplorer.core.files.atomic_file import write_atomic
from gradexplorer.core.messages.errors import UserError
from gradexplorer.core.session.environment import torch_version
from gradexplorer.gui.graph.drawing import KIND_CODES, GraphDrawing
from gradexplorer.resources import resource_path

PACKAGE = Path(__file__).resolve().parents[2]
EXAMPLES = PACKAGE / "core" / "model" / "examples"
SHIPPED = ("graphs", "example-digits.json")  # the default example's entry, in the resources
MOST_NODES = 1500  # bigger first views are not kept: drawn without an overview image (canvas.py's
# OVERVIEW_MIN_NODES), they would paint slowly; a readable first view is smaller
DECIMALS = 3  # positions kept to a thousandth of a scene unit (a node is 180 wide)
SHIPPED_IGNORES = ("gradexplorer", "torch")  # the shipped entry serves any version of either
KEEP_ENTRIES = 32  # the user's cache keeps the newest entries (each edit of a model file is one)


def spec_sources(spec: str) -> list[Path] | None:
    """The files whose contents make the model of ``spec`` (None: not known without importing
    it, e.g. ``package.module:callable``; such models are not cached)."""
    if spec.startswith("example:"):
        return sorted(EXAMPLES.glob("*.py"))
    target, sep, _name = spec.rpartition(":")
    path = Path(target)
    return [path] if sep and target.endswith(".py") and path.is_file() else None


def cache_key(spec: str, options, layout: str, hook_nodes: bool) -> dict | None:
    """What a cached first view depends on (None: this spec's source is not known)."""
    sources = spec_sources(spec)
    if sources is None:
        return None
    digest = hashlib.sha256()
    try:
        for path in sources:
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    except OSError:
        return None
    return {"spec": spec, "options": repr(options), "layout": layout, "hook_nodes": bool(hook_nodes),
            "source": digest.hexdigest()[:32], "gradexplorer": __version__, "torch": torch_version()}


def drawing_entry(drawing: GraphDrawing) -> dict | None:
    """What the view draws of ``drawing``, as JSON-able lists (None: not cacheable, e.g. node
    ids that are neither int nor str, a graph traced with gradients, or a huge one)."""
    cached = getattr(drawing, "entry", None)
    if cached is not None:
        return cached
    ids = drawing.ids
    if len(ids) > MOST_NODES or not all(type(i) in (int, str) for i in ids):
        return None
    if drawing.graph.graph.get("grad_traced"):
        return None
    from gradexplorer.core.graph.style import node_tooltip  # (style: no networkx, no torch)

    nodes = drawing.graph.nodes
    return {"ids": list(ids), "kinds": drawing.kinds.tolist(),
            "labels": [[str(line) for line in lines] for lines in drawing.labels],
            "tips": [node_tooltip(nodes[i]) for i in ids],
            "modules": list(drawing.modules), "params": list(drawing.params),
            "xy": np.round(drawing.xy, DECIMALS).tolist(), "edges": drawing.edges.tolist(),
            "layout": drawing.layout}


def cached_drawing(entry: dict) -> GraphDrawing | None:
    """A drawing made from an entry, without networkx (None: the entry is damaged). Its
    ``graph`` has graph attributes only; its ``tips`` are the nodes' tooltips."""
    try:
        n = len(entry["ids"])
        drawing = GraphDrawing.__new__(GraphDrawing)
        drawing.graph, drawing.kept, drawing.entry = SimpleNamespace(graph={}, nodes=None), None, entry
        drawing.ids = list(entry["ids"])
        drawing.index = {node: i for i, node in enumerate(drawing.ids)}
        drawing.kinds = np.array(entry["kinds"], dtype=np.int8).reshape(n)
        drawing.labels = [tuple(map(str, lines)) for lines in entry["labels"]]
        drawing.tips = [str(tip) for tip in entry["tips"]]
        drawing.modules = [str(m) for m in entry["modules"]]
        drawing.params = [None if p is None else str(p) for p in entry["params"]]
        drawing.xy = np.array(entry["xy"], dtype=float).reshape(n, 2)
        drawing.edges = np.array(entry["edges"], dtype=np.int64).reshape(-1, 2)
        drawing.layout = str(entry["layout"])
    except (KeyError, TypeError, ValueError):
        return None
    sizes = {len(drawing.labels), len(drawing.tips), len(drawing.modules), len(drawing.params)}
    in_range = not len(drawing.edges) or (drawing.edges.min() >= 0 and drawing.edges.max() < n)
    kinds_known = not n or (drawing.kinds.min() >= 0 and drawing.kinds.max() < len(KIND_CODES))
    fine = (sizes == {n} and len(drawing.index) == n and in_range and kinds_known
            and bool(np.isfinite(drawing.xy).all()))
    return drawing if fine else None


def entry_file(folder: Path, key: dict) -> Path:
    """Where ``key``'s entry is kept in ``folder``."""
    name = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
    return folder / f"{name}.json"


def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def find_entry(folder: Path | None, key: dict) -> dict | None:
    """The cached drawing entry for ``key``: the user's, else the shipped default example's
    (when its key matches but for the versions), else None."""
    stored = _read(entry_file(folder, key)) if folder is not None else None
    if not (isinstance(stored, dict) and stored.get("key") == key):
        stored = _read(resource_path(*SHIPPED))
        if not (isinstance(stored, dict) and isinstance(stored.get("key"), dict)
                and _unversioned(stored["key"]) == _unversioned(key)):
            return None
    entry = stored.get("drawing")
    return entry if isinstance(entry, dict) else None


def _unversioned(key: dict) -> dict:
    return {name: value for name, value in key.items() if name not in SHIPPED_IGNORES}


def write_entry(path: Path, key: dict, entry: dict) -> bool:
    """Write ``{key, drawing}`` atomically (folders made), then drop all but the newest
    ``KEEP_ENTRIES`` entries of that folder; False when it cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps({"key": key, "drawing": entry}, separators=(",", ":")).encode())
        entries = sorted(path.parent.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in entries[KEEP_ENTRIES:]:
            old.unlink(missing_ok=True)
    except (OSError, UserError):
        return False
    return True


def live_first_view(spec: str, options=None, layout: str = "layered", hook_nodes: bool = True):
    """The first view the app draws of ``spec`` (traced and laid out as the app does, on this
    thread: imports torch and networkx): the shipped entry is this for the default example."""
    from gradexplorer.core.model.options import ModelOptions
    from gradexplorer.core.model.spec import load_workload
    from gradexplorer.core.session.engine import SessionConfig, TrainingSession
    from gradexplorer.gui.graph.core_api import hide_hook_nodes, layout_graph, readable_view, traced_graph
    from gradexplorer.gui.graph.layout_worker import lay_out

    session = TrainingSession(load_workload(spec, options or ModelOptions()), SessionConfig("cpu"))
    graph = traced_graph(session)
    return lay_out(graph, layout, layout_graph,
                   lambda g: readable_view(g if hook_nodes else hide_hook_nodes(g))).drawing


def main() -> int:
    """``python -m gradexplorer.gui.graph.graph_cache``: write the shipped default example's entry."""
    from gradexplorer.core.model.options import DEFAULT_SPEC, ModelOptions
    from gradexplorer.gui.models.graph_view import DEFAULT_LAYOUT

    key = cache_key(DEFAULT_SPEC, ModelOptions(), DEFAULT_LAYOUT, True)
    entry = drawing_entry(live_first_view(DEFAULT_SPEC))
    path = Path(__file__).resolve().parents[3] / "resources" / Path(*SHIPPED)
    write_entry(path, key, entry)
    print(f"wrote {path} ({len(entry['ids'])} nodes, torch {key['torch']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
