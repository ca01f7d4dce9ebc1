"""Module-level views of a backward graph: whole modules shown as single nodes.

``collapse_by_module(G, depth=2)`` folds every node into its module path cut to two
components (``blocks.3.fc`` → ``blocks.3``); ``modules=[...]`` folds chosen modules;
``expanded=[...]`` opens chosen modules back up one level. A transformer's layers become a
readable chain of ``layers.0``, ``layers.1``, … nodes.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

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


def group_of(module: str, depth: int | None, chosen: frozenset[str], expanded: frozenset[str]) -> str | None:
    """The module a node with ``module`` folds into, or None to keep it as it is."""
    if not module:
        return None
    for prefix in _ancestors(module):  # outermost chosen module wins
        if prefix in chosen and prefix not in expanded:
            return prefix
    if depth is None or depth < 1:
        return None
    parts = module.split(".")
    cut = min(depth, len(parts))
    while ".".join(parts[:cut]) in expanded:  # an expanded module shows its children
        if cut == len(parts):
            return None
        cut += 1
    return ".".join(parts[:cut])


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
    for node, attrs in G.nodes(data=True):
        module = attrs.get("module") or ""
        if module not in cache:
            cache[module] = group_of(module, depth, chosen, opened)
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


def module_members(G: nx.DiGraph, path: str) -> list[Hashable]:
    """Nodes of ``G`` that belong to module ``path`` or its submodules."""
    return [n for n, m in G.nodes(data="module") if in_module(m, path)]
