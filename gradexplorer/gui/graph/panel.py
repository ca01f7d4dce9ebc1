"""The graph panel: toolbar (search, layout, detail, tint, zoom, save), view, busy indicator."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QHBoxLayout, QLabel, QLineEdit, QProgressBar, QToolBar, QVBoxLayout, QWidget

from gradexplorer.core.model.membership import owner_of
from gradexplorer.gui.graph.drawing import KIND_CODES
from gradexplorer.gui.graph.layout_worker import BackgroundQueue, LaidOut, lay_out
from gradexplorer.gui.graph.legend import legend_label
from gradexplorer.gui.graph.painting import base_fills, render_overview
from gradexplorer.gui.graph.search import GraphSearch
from gradexplorer.gui.graph.tint import node_nonfinite, node_norms, params_behind, tinted_fills
from gradexplorer.gui.graph.trace_tint import is_traced, origin_index, traced_caption, traced_fills
from gradexplorer.gui.graph.view import GraphView
from gradexplorer.gui.graph.view_controls import GraphViewControls, act_on_settings, shown_depth
from gradexplorer.gui.models.graph_view import GraphViewState
from gradexplorer.gui.models.selection import Selection, SelectionModel
from gradexplorer.gui.panels.elided_label import WholeLabel
from gradexplorer.gui.throttle import debounced
from gradexplorer.gui.window.run_controls import make_action

MODULE_KIND = KIND_CODES.index("module")
OVERVIEW_DELAY_MS = 300
RELAYOUT_MOST = 3000  # nodes: a hook click lays a graph this small out afresh (no overlaps);
# a bigger one gets its hook nodes inserted in place, within the 100 ms a click may take


class GraphPanel(GraphSearch, QWidget):
    """Shows a backward graph; the graph itself comes from ``set_graph``."""

    hook_menu_requested = Signal(str, QPoint)  # module path, global position
    refresh_requested = Signal()
    laid_out = Signal(object)  # the graph now shown (collapsed or not)
    hook_selected_requested = Signal()

    def __init__(self, selection: SelectionModel, view_state: GraphViewState | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.selection = selection
        self.view_state = view_state or GraphViewState()  # layout, detail, hook nodes, tint, trace
        self.graph = None
        self.drawing = None
        self.cached = None  # a drawing read from the graph cache, shown until the live one
        self.expanded: set[str] = set()
        self._behind: list[list[str]] = []
        self._stats: dict = {}
        self._hooks: dict[str, str] = {}
        self._auto_depth = False  # the next layout chooses a readable detail level itself
        self._fit_next = False  # the next drawing is fitted to the view
        self.view = GraphView()
        self.layouts = BackgroundQueue(self)
        self.overviews = BackgroundQueue(self)
        # overview images render on a pool thread that holds the GIL much of the time: start
        # one only once clicks and redraws have settled, so it never delays a redraw
        self._overview_soon = debounced(self._render_overview, timeout=OVERVIEW_DELAY_MS, parent=self)
        self._build_toolbar()
        self._acting = act_on_settings(self)
        self.layouts.finished.connect(self._laid_out)
        self.layouts.failed.connect(lambda _n, text: self.busy_label.setText(f"layout failed: {text}"))
        self.layouts.busy_changed.connect(self._show_busy)
        self.overviews.finished.connect(self._overview_ready)
        self.view.node_clicked.connect(self._clicked)
        self.view.node_double_clicked.connect(self._double_clicked)
        self.view.context_requested.connect(self._context)
        selection.changed.connect(self.show_selection)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.search_row)
        layout.addWidget(self.toolbar)
        layout.addWidget(self.view, 1)
        layout.addWidget(legend_label())

    # -- toolbar -------------------------------------------------------------------------
    def _build_toolbar(self) -> None:
        bar = self.toolbar = QToolBar("Graph")
        bar.setIconSize(bar.iconSize() * 0.8)
        bar.setToolButtonStyle(Qt.ToolButtonIconOnly)  # names in tooltips: fits a narrow panel
        self.search_edit = QLineEdit(placeholderText="find op, module or parameter (Ctrl+F)")
        self.search_edit.setClearButtonEnabled(True)
        self.search_edit.setMinimumWidth(56)  # the model dock keeps its 320 px on a 1024x700 screen
        self.search_edit.setMaximumWidth(320)
        self.search_edit.textChanged.connect(self.search)
        self.search_edit.returnPressed.connect(self.next_match)
        leave = QShortcut(QKeySequence(Qt.Key_Escape), self.search_edit, context=Qt.WidgetShortcut)
        leave.activated.connect(self.leave_search)
        self.match_label = QLabel("")
        self.reset_search()  # (GraphSearch: the hits, and this label emptied)
        controls = self.controls = GraphViewControls(self.view_state, self)
        self.layout_box, self.detail_box = controls.layout_box, controls.detail_box
        self.hook_nodes_action, self.tint_action = controls.hook_nodes_action, controls.tint_action
        self.trace_grads_action = controls.trace_grads_action
        self.fit_action = make_action(self, "Fit", "fit", "Ctrl+0", self.view.fit)
        self.zoom_sel_action = make_action(self, "Zoom to selection", "zoom-selection", "Ctrl+1",
                                           self.zoom_to_selection)
        self.find_action = make_action(self, "Find", "search", "Ctrl+F", self._focus_search)
        self.hook_action = make_action(self, "Hook…", "hook", "H", self.hook_selected_requested.emit)
        self.hook_action.setToolTip("attach or detach a hook on the selected module (H)")
        self.refresh_action = make_action(self, "Re-trace", "graph", None, self.refresh_requested.emit)
        self.refresh_action.setToolTip("trace the backward graph again")
        self.busy_bar = QProgressBar(maximum=0, maximumWidth=80, textVisible=False, visible=False)
        self.busy_label = WholeLabel("")
        self.busy_label.setObjectName("busy")
        self.search_row = QWidget()  # a row of its own: the toolbar below fits narrow panels
        row = QHBoxLayout(self.search_row)
        row.setContentsMargins(4, 3, 4, 0)
        row.addWidget(self.search_edit, 1)
        row.addWidget(self.match_label)
        row.addWidget(self.layout_box)
        row.addWidget(self.detail_box)
        bar.addAction(self.hook_action)
        for action in (self.hook_nodes_action, self.tint_action, self.trace_grads_action, self.fit_action,
                       self.zoom_sel_action, self.refresh_action):
            bar.addAction(action)
        controls.micro_action = bar.insertWidget(self.fit_action, controls.micro_box)  # traced k ≥ 2
        self.hook_action.setShortcutContext(Qt.WindowShortcut)
        self.addAction(self.find_action)
        bar.addWidget(self.busy_bar)
        bar.addWidget(self.busy_label)

    def _focus_search(self) -> None:
        self.search_edit.setFocus()
        self.search_edit.selectAll()

    def _show_busy(self, busy: bool) -> None:
        self.busy_bar.setVisible(busy)
        if busy:
            self.busy_label.setText("laying out…")

    def busy(self) -> bool:
        """Whether a layout or an overview image is being computed (or about to be)."""
        return self.layouts.busy or self.overviews.busy

    def flush(self) -> None:
        """Start now the overview render that waits for clicks to settle."""
        self._overview_soon.flush()

    # -- graph and layout ----------------------------------------------------------------------
    def set_graph(self, graph, fit: bool = True) -> None:
        """Show a traced graph; ``fit`` (a new model): a readable detail level, then fit.

        Re-traces of the same model (``fit=False``) keep the chosen layout and detail level.
        """
        self.graph = graph
        if fit:
            self.expanded = set()
            self._auto_depth = True  # chosen off the GUI thread with the layout
        self.relayout(fit=fit)

    def clear(self) -> None:
        """Show nothing (a new model is being opened): no graph, tint, hooks, search hits."""
        self.graph = self.drawing = self.cached = None
        self._stats, self._hooks, self._behind, self.expanded = {}, {}, [], set()
        self.reset_search()
        self.layouts.cancel()  # a layout still running for the old model is stale
        self.view.canvas.clear()
        self.view.minimap.set_drawing(None)
        self.view.resetTransform()
        self.match_label.setText("")
        self.busy_label.setText("")

    def show_cached(self, drawing) -> None:
        """Draw a graph read from the graph cache (``graph_cache``) while the model loads: no
        graph behind it (nothing to search, re-lay out or hook) until ``set_graph``'s live one
        replaces it, keeping the view when the two are the same drawing."""
        self.drawing = self.cached = drawing
        self.view.canvas.set_drawing(drawing)
        self.view.minimap.set_drawing(drawing, base_fills(drawing))
        self.view.first_view()
        self.busy_label.setText("last drawing · loading…")  # as drawn last time: whole in a short toolbar

    @property
    def live_drawing(self):
        """The drawing shown when it is the live graph's (None while a cached one is shown)."""
        return self.drawing if self.cached is None else None

    def detail_depth(self) -> int | None:
        """The module depth shown (None: every operation)."""
        return self.view_state.detail

    def relayout(self, fit: bool = False) -> None:
        """Recompute the layout off the GUI thread."""
        if self.graph is None:
            return
        self._fit_next = fit or self._fit_next
        graph, name = self.graph, self.view_state.layout
        # core_api (networkx, torch) is imported by the trace that made ``graph``: no import here
        from gradexplorer.gui.graph.core_api import layout_graph

        self.layouts.request(lambda: lay_out(graph, name, layout_graph, self._collapser()))

    def _collapser(self):
        """graph -> shown graph: hook nodes hidden or not, modules collapsed or not."""
        depth, auto = self.detail_depth(), self._auto_depth
        expanded, hide = sorted(self.expanded), not self.view_state.hook_nodes
        from gradexplorer.gui.graph.core_api import collapse_by_module, hide_hook_nodes, readable_view

        def transform(graph):
            shown = hide_hook_nodes(graph) if hide else graph
            if auto:
                return readable_view(shown)
            return shown if depth is None else collapse_by_module(shown, depth=depth,
                                                                   expanded=expanded)
        return transform

    def detail_chosen(self) -> None:
        """A detail level was chosen: every module folded to it, laid out and fitted afresh."""
        self.expanded, self._auto_depth = set(), False
        self.relayout(fit=True)

    def change_hooks(self, hooks: dict[str, str], model) -> bool:
        """The hook table is now ``hooks``: hook nodes appear on modules attached since the
        last table and leave detached ones, without a trace (``edit_hooks``), and hooked
        modules are ringed; False when only a trace can place the hook nodes."""
        attached = [p for p in hooks if p not in self._hooks]
        detached = [p for p in self._hooks if p not in hooks]
        placed = self.graph is None or not (attached or detached) \
            or self.edit_hooks(attached, detached, model)
        self.set_hooks(hooks)
        return placed

    def edit_hooks(self, attached: list[str], detached: list[str], model) -> bool:
        """Show hook nodes appearing on ``attached`` modules and leaving ``detached`` ones
        without a trace, keeping the layout; False when only a trace can tell (see
        ``core.graph.hook_nodes``). ``model`` is only read (module signatures)."""
        from gradexplorer.gui.graph.core_api import gc_paused

        with gc_paused():  # tens of thousands of small objects: the cyclic collector only slows that
            return self._edit_hooks(attached, detached, model)

    def _edit_hooks(self, attached: list[str], detached: list[str], model) -> bool:
        from gradexplorer.gui.graph.core_api import add_hook_nodes, remove_hook_nodes

        graph = self.graph
        for path, edit in ((p, add_hook_nodes) for p in attached):
            graph = graph and edit(graph, path, model.get_submodule(path))
        for path in detached:
            graph = graph and remove_hook_nodes(graph, path, model.get_submodule(path))
        if graph is None or self.drawing is None:
            return False
        self.graph = graph
        if (self.layouts.busy or self.view_state.detail is not None
                or len(graph) <= RELAYOUT_MOST):
            self.relayout()  # off the thread: where a fresh layout puts every node, hooks included
        elif self.view_state.hook_nodes:
            canvas = self.view.canvas  # the old overview image until a new one is drawn
            self._show(self.drawing.with_graph(graph), canvas.overview, canvas.overview_scale,
                       previous=self._behind)
            self._overview_soon()
        return True

    def _laid_out(self, number: int, result: LaidOut) -> None:
        if number != self.layouts.latest:
            return  # superseded by a newer request
        if self._auto_depth:  # show the depth the first view was collapsed to
            self._auto_depth = False
            depth = result.drawing.graph.graph.get("collapsed", {}).get("depth")
            self.view_state.show_chosen_detail(shown_depth(depth))
        nodes = f"{len(result.drawing):,} nodes"  # short: whole in a 1024×700 window's toolbar
        self.busy_label.setText(f"{nodes} · {result.seconds:.2f} s" + traced_caption(result.drawing, True))
        self.busy_label.setToolTip(f"{nodes}, laid out in {result.seconds:.2f} s"
                                   + traced_caption(result.drawing))
        self.controls.show_traced(result.drawing.graph.graph)
        self._show(result.drawing, result.overview, result.scale)

    def _show(self, drawing, overview, scale: float, previous=None) -> None:
        from gradexplorer.gui.graph.graph_cache import drawing_entry

        cached, self.cached = self.cached, None  # the same drawing as the cached one: view kept
        keep = cached is not None and drawing_entry(drawing) == drawing_entry(cached)
        self.drawing = drawing
        self.view.canvas.set_drawing(drawing, overview, scale)
        self.view.minimap.set_drawing(drawing, base_fills(drawing))
        self._behind = params_behind(drawing, list(self._stats) or self._param_names(), previous)
        self.refresh_tint()
        self.set_hooks(self._hooks)
        self.search(self.search_edit.text())
        self.show_selection(self.selection.current)
        if self._fit_next:
            self._fit_next = False
            if not keep:
                self.view.first_view()
        self._centre_origin()
        if self._reveal is not None:
            self._show_hit(self._reveal)
        self.laid_out.emit(drawing.graph)

    def _centre_origin(self) -> None:
        """Select and centre the node where NaN/Inf was born, when the trace found one."""
        index = origin_index(self.drawing)
        self.view.canvas.set_highlights(origin=[] if index is None else [index])
        if index is not None:
            self._clicked(index)
            self.view.zoom_to([index])

    def _param_names(self) -> list[str]:
        return [a["param"] for _, a in self.graph.nodes(data=True) if a.get("param")]

    # -- overlays ----------------------------------------------------------------------------------
    def set_stats(self, params: dict) -> None:
        """Latest per-parameter statistics: recolour the nodes (the caller throttles this)."""
        first = not self._stats
        self._stats = params
        if first and self.drawing is not None:
            self._behind = params_behind(self.drawing, list(params))
        self.refresh_tint()

    def refresh_tint(self) -> None:
        """Recolour nodes by gradient norm (or by kind when the tint is off)."""
        drawing = self.drawing
        if drawing is None:
            return
        fills = base_fills(drawing)
        if self.view_state.tint and is_traced(drawing):
            fills = traced_fills(fills, drawing)
        elif self.view_state.tint and self._stats:
            fills = tinted_fills(fills, node_norms(self._behind, self._stats),
                                 node_nonfinite(self._behind, self._stats))
        if np.array_equal(fills, self.view.canvas.fills):
            return
        self.view.canvas.set_fills(fills)
        self._overview_soon()

    def _render_overview(self) -> None:
        """Redraw the far-out overview image off the GUI thread (for the current colours)."""
        canvas, drawing = self.view.canvas, self.drawing
        if drawing is None or canvas.overview is None or canvas.drawing is not drawing:
            return
        fills, scale = canvas.fills, canvas.overview_scale
        self.overviews.request(lambda: (drawing, render_overview(drawing, fills, scale), scale))

    def _overview_ready(self, _number: int, result) -> None:
        drawing, image, scale = result
        if drawing is self.drawing:
            self.view.canvas.set_overview(image, scale)

    def set_hooks(self, hooks: dict[str, str]) -> None:
        """Ring the nodes of hooked modules."""
        self._hooks = dict(hooks)
        if self.drawing is not None:
            marked = sorted({i for path in hooks for i in self.drawing.nodes_of_module(path)
                             if self.drawing.params[i] is None})
            self.view.canvas.set_highlights(marked=marked)

    # -- selection -------------------------------------------------------------------------------
    def _clicked(self, index: int) -> None:
        if index < 0 or self.drawing is None:
            self.selection.clear()
            return
        d = self.drawing
        param = d.params[index]
        module = param.rpartition(".")[0] if param else d.modules[index]
        self.selection.select(node=d.ids[index], module=module, param=param, source="graph")

    def show_selection(self, selection: Selection) -> None:
        """Ring the selected node, or every node of the selected module or parameter."""
        d = self.drawing
        if d is None:
            return
        if selection.node is not None and selection.node in d.index:
            nodes = [d.index[selection.node]]
        elif selection.param:
            nodes = [i for i, p in enumerate(d.params) if p == selection.param]
        elif selection.module is not None:
            nodes = d.nodes_of_module(selection.module)
        else:
            nodes = []
        path = selection.module if selection.module is not None else owner_of(selection.param or "")
        while not nodes and path:  # folded into a module at this detail level: ring that one
            nodes = [i for i, m in enumerate(d.modules) if m == path and d.kinds[i] == MODULE_KIND]
            path = path.rpartition(".")[0]
        self.view.canvas.set_highlights(selected=nodes)

    def selected_nodes(self) -> np.ndarray:
        """Indices currently ringed as selected."""
        return self.view.canvas.selected

    def zoom_to_selection(self) -> None:
        """Frame the selected nodes."""
        self.view.zoom_to(self.selected_nodes())

    def _double_clicked(self, index: int) -> None:
        d = self.drawing
        if d is not None and d.kinds[index] == MODULE_KIND and d.modules[index]:  # a collapsed module
            self.expanded.add(d.modules[index])
            self.relayout()

    def _context(self, index: int, where: QPoint) -> None:
        if index < 0 or self.drawing is None or self.cached is not None:  # no model to hook yet
            return
        param = self.drawing.params[index]
        module = param.rpartition(".")[0] if param else self.drawing.modules[index]
        self._clicked(index)
        self.hook_menu_requested.emit(module, where)
