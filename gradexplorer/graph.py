"""The backward graph: traced, extracted, collapsed by module, laid out, exported.

Documented in ``docs/api.md``; names load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gradexplorer._lazy import lazy_names

__all__ = [
    "collapse_by_module",
    "export_graph",
    "extract_graph",
    "layout_graph",
    "trace",
    "trace_backward_graph",
]

__getattr__, __dir__ = lazy_names(__name__, {
    "trace": "gradexplorer.core.graph.extract",
    "extract_graph": "gradexplorer.core.graph.extract",
    "trace_backward_graph": "gradexplorer.core.graph.extract",
    "collapse_by_module": "gradexplorer.core.graph.collapse",
    "layout_graph": "gradexplorer.core.graph.layout.positions",
    "export_graph": "gradexplorer.core.graph.export.files",
})

if TYPE_CHECKING:  # for type checkers and IDEs; at run time names load lazily above
    from gradexplorer.core.graph.collapse import collapse_by_module
    from gradexplorer.core.graph.export.files import export_graph
    from gradexplorer.core.graph.extract import extract_graph, trace, trace_backward_graph
    from gradexplorer.core.graph.layout.positions import layout_graph
