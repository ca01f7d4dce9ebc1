"""The graph panel's settings controls, bound to its ``GraphViewState`` (``gui/models/graph_view.py``).

The widgets only show the state and set it; what a setting does (lay out again, re-tint,
re-trace) follows the state's events, whoever changed it: a control, a menu, a script.
"""

from __future__ import annotations

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QComboBox, QSpinBox, QWidget

from gradexplorer.core.graph.layout import LAYOUTS
from gradexplorer.gui.graph.legend import reads_whole
from gradexplorer.gui.models.graph_view import GraphViewState
from gradexplorer.gui.theme import icon

DETAIL_LEVELS = (("Operations", None), *((f"Modules, depth {d}", d) for d in range(1, 9)))


MICRO_TIP = ("the micro-batch of the step whose graph is traced: its ops show what that "
             "micro-batch's backward sent (its loss ÷ k); parameters show the step's gradient "
             "accumulated over all of them, as the optimizer applies it")
REPLAYED_TIP = ("; the replay of a step whose gradient held NaN/Inf shows the micro-batch its "
                "NaN/Inf was born in")


def detail_index(depth: int | None) -> int:
    """The detail box's row for a module depth (None: every operation; deeper: the deepest row)."""
    return 0 if depth is None else min(depth, len(DETAIL_LEVELS) - 1)


def shown_depth(depth: int | None) -> int | None:
    """The detail level that shows a graph collapsed to ``depth`` (the deepest one for deeper)."""
    return DETAIL_LEVELS[detail_index(depth)][1]


class GraphViewControls:
    """Layout and detail boxes, hook-node, tint and trace-gradients toggles, showing ``state``."""

    def __init__(self, state: GraphViewState, parent: QWidget) -> None:
        self.state = state
        self.layout_box = QComboBox(toolTip="layout algorithm")
        self.layout_box.addItems(list(LAYOUTS))
        self.detail_box = QComboBox(toolTip="show every operation, or one node per module")
        for text, _depth in DETAIL_LEVELS:
            self.detail_box.addItem(text)
        reads_whole(self.layout_box)  # each as wide as its item; the search box beside gives way
        reads_whole(self.detail_box)
        self.hook_nodes_action = QAction(icon("hook-node"), "Hook nodes", parent, checkable=True,
                                         toolTip="show the nodes that full backward hooks insert "
                                         "(BackwardHookFunctionBackward)")
        self.tint_action = QAction(icon("tint"), "Tint", parent, checkable=True,
                                   toolTip="colour nodes by the latest gradient norm")
        self.trace_grads_action = QAction(icon("trace-grads"), "Trace gradients", parent, checkable=True,
                                          toolTip="trace the gradient through every op (a hooked "
                                          "backward pass on each re-trace) and mark where NaN/Inf "
                                          "is born")
        self.micro_box = QSpinBox(minimum=1, maximum=1, prefix="micro-batch ", toolTip=MICRO_TIP)
        self.micro_box.setKeyboardTracking(False)
        self.micro_box.setMaximumWidth(126)  # "micro-batch 1/4" beside Trace gradients at 921 px
        self.micro_action = None  # the panel's toolbar action holding it (shown where it applies)
        self._show_all()
        self.micro_box.valueChanged.connect(lambda v: setattr(state, "micro_batch", v - 1))
        self.layout_box.activated.connect(lambda i: setattr(state, "layout", self.layout_box.itemText(i)))
        self.detail_box.activated.connect(lambda i: setattr(state, "detail", DETAIL_LEVELS[i][1]))
        self.hook_nodes_action.toggled.connect(lambda on: setattr(state, "hook_nodes", on))
        self.tint_action.toggled.connect(lambda on: setattr(state, "tint", on))
        self.trace_grads_action.toggled.connect(lambda on: setattr(state, "trace_grads", on))
        self._shows = ((state.layout_changed, self._show_layout),
                       (state.detail_changed, self._show_detail),
                       (state.hook_nodes_changed, lambda on: self.hook_nodes_action.setChecked(on)),
                       (state.tint_changed, lambda on: self.tint_action.setChecked(on)),
                       (state.trace_grads_changed, lambda on: self.trace_grads_action.setChecked(on)))
        for signal, show in self._shows:
            signal.connect(show)

    def show_traced(self, attrs: dict) -> None:
        """A graph was drawn (``attrs``: its graph attributes): the micro-batch box shown for a
        traced step of several micro-batches, at the one drawn (fixed on a replayed NaN step:
        the micro-batch its NaN/Inf was born in)."""
        k = attrs.get("micro_batches") if attrs.get("grad_traced") else None
        if self.micro_action is not None:
            self.micro_action.setVisible(bool(k))
        if not k:
            return
        box = self.micro_box
        box.blockSignals(True)
        box.setMaximum(k)
        box.setSuffix(f"/{k}")
        box.setValue(attrs["micro_batch"] + 1)
        box.blockSignals(False)
        replayed = bool(attrs.get("replayed"))
        box.setEnabled(not replayed)
        box.setToolTip(MICRO_TIP + (REPLAYED_TIP if replayed else ""))

    def _show_all(self) -> None:
        state = self.state
        self._show_layout(state.layout)
        self._show_detail(state.detail)
        self.hook_nodes_action.setChecked(state.hook_nodes)
        self.tint_action.setChecked(state.tint)
        self.trace_grads_action.setChecked(state.trace_grads)

    def _show_layout(self, name: str) -> None:
        self.layout_box.setCurrentIndex(max(self.layout_box.findText(name), 0))

    def _show_detail(self, depth: int | None, _automatic: bool = False) -> None:
        self.detail_box.setCurrentIndex(detail_index(depth))


def act_on_settings(panel) -> list:
    """Make ``panel`` do what each setting of its ``view_state`` means when it changes:
    lay out again (layout, hook nodes, a detail level the user chose), re-tint, re-trace.
    Returns the (signal, slot) pairs, for disconnecting."""
    state = panel.view_state
    pairs = [(state.layout_changed, lambda _name: panel.relayout()),
             (state.detail_changed, lambda _depth, automatic: None if automatic else panel.detail_chosen()),
             (state.hook_nodes_changed, lambda _on: panel.relayout()),
             (state.tint_changed, lambda _on: panel.refresh_tint()),
             (state.trace_grads_changed, lambda _on: panel.refresh_requested.emit()),
             (state.micro_batch_changed, lambda _j: state.trace_grads and panel.refresh_requested.emit())]
    for signal, slot in pairs:
        signal.connect(slot)
    return pairs
