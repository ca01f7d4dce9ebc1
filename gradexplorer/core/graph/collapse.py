"""Module-level views of a backward graph: whole modules shown as single nodes.

``collapse_by_module(G, depth=2)`` folds every node into its module path cut to two
components (``blocks.3.fc`` → ``blocks.3``); ``modules=[...]`` folds chosen modules;
``expanded=[...]`` opens chosen modules back up one level. A transformer's layers become a
readable chain of ``layers.0``, ``layers.1``, … nodes.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

import networkx as nx

from gradexplorer.core.model.membership import in_module

MODULE_PREFIX = "module:"


def module_node_id(path: str) -> str:
    """Node id of a collapsed module."""
    return MODULE_PREFIX + path


def _ancestors(path: str) -> Iterable[str]:
    """``a.b.c`` → ``a``, ``a.b``, ``a.b.c`` (outermost first)."""
    parts = path.split(".")
    for i in range(1, len(parts) + 1):
        yield ".".join(parts[:i])


def group_of(module: str, depth: int | None, chosen: frozenset[str], expanded: frozenset[str],
             parents: frozenset[str] = frozenset()) -> str | None:
    """The module a node with ``module`` folds into, or None to keep it as it is.

    ``parents``: modules with nodes of submodules in the graph. A node directly in such a module
    above ``depth`` (a full backward hook on a ``Sequential``, the embedding sum of a
    ``GPT2Model``) is kept as it is, as in an expanded module: its submodules are groups of
    their own, and one node for the rest of the module would join them in a cycle.
    """
    if not module:
        return None
    for prefix in _ancestors(module):  # outermost chosen module wins
        if prefix in chosen and prefix not in expanded:
            return prefix
    if depth is None or depth < 1:
        return None
    parts = module.split(".")
    if len(parts) < depth and module in parents:
        return None
    cut = min(depth, len(parts))
    while ".".join(parts[:cut]) in expanded:  # an expanded module shows its children
        if cut == len(parts):
            return None
        cut += 1
    return ".".join(parts[:cut])


def parent_modules(G: nx.DiGraph) -> frozenset[str]:
    """Every proper ancestor path of the nodes' modules (``a`` and ``a.b`` for ``a.b.c``)."""
    parents: set[str] = set()
    for module in {m for _, m in G.nodes(data="module") if m}:
        parts = module.split(".")
        parents.update(".".join(parts[:i]) for i in range(1, len(parts)))
    return frozenset(parents)


def collapse_by_module(G: nx.DiGraph, depth: int | None = None, modules: Iterable[str] | None = None,
                       *, expanded: Iterable[str] = ()) -> nx.DiGraph:
    """A graph with modules folded into single nodes (``kind="module"``).

    Module nodes carry ``name`` (the module's class when known), ``module`` (its path),
    ``members`` (how many nodes it holds), ``params`` (its parameter names) and ``kinds``
    (members per kind). Edges between groups keep ``slot`` (the smallest) and ``count``.
    Nodes outside any folded module stay as they are. ``G`` is not modified.
    """
    chosen = frozenset(modules or ())
    opened = frozenset(expanded)
    types = G.graph.get("module_types", {})
    H = nx.DiGraph(**G.graph)
    H.graph["collapsed"] = {"depth": depth, "modules": sorted(chosen), "expanded": sorted(opened)}
    group: dict[Hashable, Hashable] = {}
    cache: dict[str, str | None] = {}
    parents = parent_modules(G)
    for node, attrs in G.nodes(data=True):
        module = attrs.get("module") or ""
        if module not in cache:
            cache[module] = group_of(module, depth, chosen, opened, parents)
        path = cache[module]
        if path is None or attrs.get("kind") == "loss":
            group[node] = node
            H.add_node(node, **attrs)
            continue
        gid = group[node] = module_node_id(path)
        if gid not in H:
            H.add_node(gid, name=types.get(path, ""), kind="module", module=path, param=None,
                       shape=None, dtype=None, saved={}, members=0, params=[], kinds={})
        data = H.nodes[gid]
        data["members"] += 1
        data["kinds"][attrs.get("kind")] = data["kinds"].get(attrs.get("kind"), 0) + 1
        if attrs.get("param"):
            data["params"].append(attrs["param"])
        if attrs.get("grad_norm") is not None:
            fold_traced_gradient(data, attrs)
    for u, v, attrs in G.edges(data=True):
        a, b = group[u], group[v]
        if a == b:
            continue
        if H.has_edge(a, b):
            edge = H.edges[a, b]
            edge["count"] += 1
            edge["slot"] = min(edge["slot"], attrs.get("slot", 0))
        else:
            H.add_edge(a, b, slot=attrs.get("slot", 0), count=1)
    return H


def fold_traced_gradient(module: dict, member: Mapping[str, Any]) -> None:
    """A collapsed module's traced gradient (``trace_gradients``) is its members' largest:
    ``grad_norm`` and ``grad_max`` are the largest finite ones, ``grad_finite`` is False as
    soon as one member sent NaN/Inf, so the tint and the alarm colour reach folded modules."""
    norm, peak = member.get("grad_norm"), member.get("grad_max", float("nan"))
    finite = bool(member.get("grad_finite", True)) and math.isfinite(norm)
    module["grad_finite"] = module.get("grad_finite", True) and finite
    module.setdefault("grad_norm", float("nan"))
    module.setdefault("grad_max", float("nan"))
    if finite:
        module["grad_norm"] = max(norm, module["grad_norm"]) if math.isfinite(
            module["grad_norm"]) else norm
        if math.isfinite(peak):
            module["grad_max"] = max(peak, module["grad_max"]) if math.isfinite(
                module["grad_max"]) else peak


def module_members(G: nx.DiGraph, path: str) -> list[Hashable]:
    """Nodes of ``G`` that belong to module ``path`` or its submodules."""
    return [n for n, m in G.nodes(data="module") if in_module(m, path)]


READABLE_NODES = 300  # graphs up to this size (and READABLE_LAYERS long) show every operation
READABLE_GROUPS = 150  # a collapsed first view aims at no more nodes than this
READABLE_LAYERS = 30  # ... and no longer a chain than this (a fitted view keeps its text)


def groups_at_depth(G: nx.DiGraph, depth: int) -> int:
    """How many nodes ``collapse_by_module(G, depth)`` would show, without building it."""
    cache: dict[str, str | None] = {}
    parents = parent_modules(G)
    groups: set[str] = set()
    loose = 0
    for _, attrs in G.nodes(data=True):
        module = attrs.get("module") or ""
        if module not in cache:
            cache[module] = group_of(module, depth, frozenset(), frozenset(), parents)
        path = cache[module]
        if path is None or attrs.get("kind") == "loss":
            loose += 1
        else:
            groups.add(path)
    return loose + len(groups)


def readable_depth(G: nx.DiGraph, most_nodes: int = READABLE_GROUPS,
                   small: int = READABLE_NODES, most_layers: int = READABLE_LAYERS) -> int | None:
    """The module depth a first view of ``G`` should collapse to; None: show every operation.

    Graphs of at most ``small`` nodes in chains of at most ``most_layers`` stay whole (a fitted
    view of them keeps its text). Others fold at the deepest depth that shows at most
    ``most_nodes`` nodes in chains of at most ``most_layers`` (depth 1 when even that shows
    more): ResNet-18's 133 operations in a chain of 65 open as its residual blocks.
    """
    return readable_view(G, most_nodes, small, most_layers).graph["collapsed"]["depth"]


def readable_view(G: nx.DiGraph, most_nodes: int = READABLE_GROUPS, small: int = READABLE_NODES,
                  most_layers: int = READABLE_LAYERS) -> nx.DiGraph:
    """``G`` collapsed at :func:`readable_depth` (``graph["collapsed"]["depth"]`` says which),
    built once."""
    fits = G.number_of_nodes() <= small and layer_count(G) <= most_layers
    deepest = 0 if fits else max(
        (len(m.split(".")) for _, m in G.nodes(data="module") if m), default=0)
    if not deepest:
        return collapse_by_module(G)  # nothing folds: every operation, depth None
    chosen = None
    for depth in range(1, deepest + 1):
        if depth > 1 and groups_at_depth(G, depth) > most_nodes:
            break
        H = collapse_by_module(G, depth=depth)
        if depth > 1 and layer_count(H) > most_layers:
            break
        chosen = H
        if H.number_of_nodes() > most_nodes or layer_count(H) > most_layers:
            break  # even depth 1 is too much: it is still the coarsest view
    return chosen


def layer_count(G: nx.DiGraph) -> int:
    """Nodes on the longest chain of ``G``, a cycle counting each of its nodes once."""
    C = nx.condensation(G)
    longest: dict[int, int] = {}
    for c in nx.topological_sort(C):
        size = len(C.nodes[c]["members"])
        longest[c] = size + max((longest[p] for p in C.predecessors(c)), default=0)
    return max(longest.values(), default=0)


def expansions_to_reveal(module: str, depth: int | None, expanded: Iterable[str] = ()) -> list[str]:
    """Modules to add to ``expanded`` so that a node of ``module`` shows on its own.

    At ``depth`` a node of ``a.b.c.d`` folds into ``a.b`` (depth 2); opening ``a.b``, ``a.b.c``
    and ``a.b.c.d`` shows it. Already expanded modules are left out.
    """
    if not module or depth is None or depth < 1:
        return []
    parts = module.split(".")
    opened = set(expanded)
    paths = (".".join(parts[:cut]) for cut in range(min(depth, len(parts)), len(parts) + 1))
    return [p for p in paths if p not in opened]
