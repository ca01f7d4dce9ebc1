"""Search over the whole backward graph, collapsed modules included (part of the graph panel)."""

from __future__ import annotations

from gradexplorer.gui.graph.drawing import search_graph


class GraphSearch:
    """The graph panel's search: hits are nodes of the whole graph; a hit inside a collapsed
    module rings that module, and Enter opens the modules around it and selects it.

    Uses the panel's ``graph``, ``drawing``, ``view``, ``expanded``, ``match_label``,
    ``view_state``, ``detail_depth()``, ``relayout()`` and ``_clicked(index)``.
    """

    def reset_search(self) -> None:
        """Forget the hits and where Enter had got to."""
        self._matches: list = []  # search hits: node ids of the whole graph
        self._match_cursor = -1
        self._searched = ""
        self._reveal = None  # a hit being expanded into view
        self.match_label.setText("")

    def leave_search(self) -> None:
        """Escape in the search box: clear it (and its rings) and give the keys to the graph."""
        self.search_edit.clear()
        self.view.setFocus()

    def search(self, text: str) -> None:
        """Highlight nodes matching ``text``, and the collapsed modules that hold more.

        The whole graph is searched, not just what is shown; Enter walks the hits and opens
        the collapsed modules around each one.
        """
        if self.graph is None or self.drawing is None:
            return
        hide = not self.view_state.hook_nodes
        hits = search_graph(self.graph, text, skip_hooks=hide)
        if text != self._searched:
            self._match_cursor, self._searched = -1, text
        self._matches = hits
        shown = {self._shown_index(node) for node in hits} - {None}
        self.view.canvas.set_highlights(matches=sorted(shown))
        hidden = sum(1 for node in hits if node not in self.drawing.index)
        note = f" ({hidden} in collapsed modules: Enter opens them)" if hidden else ""
        self.match_label.setText(f" {len(hits)} found{note} " if text.strip() else "")

    def _shown_index(self, node) -> int | None:
        return self.drawing.shown_as(node, self.graph.nodes[node].get("module") or "")

    def next_match(self) -> None:
        """Select and frame the next search hit, opening collapsed modules around it."""
        if not self._matches or self.drawing is None:
            return
        self._match_cursor = (self._match_cursor + 1) % len(self._matches)
        node = self._matches[self._match_cursor]
        if node in self.drawing.index:
            self._show_hit(node)
            return
        module = self.graph.nodes[node].get("module") or ""
        from gradexplorer.gui.graph.core_api import expansions_to_reveal

        self.expanded.update(expansions_to_reveal(module, self.detail_depth(), self.expanded))
        self._reveal = node
        self.relayout()

    def _show_hit(self, node) -> None:
        self._reveal = None
        index = self.drawing.index.get(node)
        if index is not None:
            self._clicked(index)
            self.view.zoom_to([index])

