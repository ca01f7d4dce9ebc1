"""No import circle inside ``gradexplorer.core``: module by module, lazy imports counted too
(issue 41: the run reader and the run writer imported each other)."""

import sys

import grimp


def circles(graph: grimp.ImportGraph, prefix: str) -> list[list[str]]:
    """The groups of modules under ``prefix`` that reach each other by imports (Tarjan's
    strongly connected components with more than one module, or a module importing itself)."""
    modules = sorted(m for m in graph.modules if m.startswith(prefix))
    edges = {m: sorted(x for x in graph.find_modules_directly_imported_by(m) if x.startswith(prefix))
             for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in edges[module]:
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                group.append(other)
                if other == module:
                    break
            if len(group) > 1 or module in edges[module]:
                found.append(sorted(group))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for module in modules:
            if module not in index:
                visit(module)
    finally:
        sys.setrecursionlimit(limit)
    return found


def test_circles_are_found_in_a_graph_that_has_one():
    graph = grimp.ImportGraph()
    for name in ("pkg.a", "pkg.b", "pkg.c"):
        graph.add_module(name)
    graph.add_import(importer="pkg.a", imported="pkg.b")
    graph.add_import(importer="pkg.b", imported="pkg.a")
    graph.add_import(importer="pkg.c", imported="pkg.a")
    assert circles(graph, "pkg.") == [["pkg.a", "pkg.b"]]


def test_no_import_circle_inside_core():
    graph = grimp.build_graph("gradexplorer", exclude_type_checking_imports=True, cache_dir=None)
    assert sum(1 for m in graph.modules if m.startswith("gradexplorer.core.")) > 50
    assert circles(graph, "gradexplorer.core.") == []
