"""The graph view's settings (Qt-free), as glue's viewer state: the one place they are kept.

The graph panel's controls show and set these (``gui/graph/view_controls.py``); the panel acts
on their events (a new layout, a re-tint, a re-trace); any other part of the app reads or sets
them here, never in a widget.
"""

from __future__ import annotations

from psygnal import Signal

DEFAULT_LAYOUT = "layered"  # the first of core.graph.layout.LAYOUTS


class GraphViewState:
    """How the backward graph is shown. Each setting announces a change (and only a change):

    - ``layout_changed(str)``: the layout algorithm (a name of ``LAYOUTS``);
    - ``detail_changed(depth, automatic)``: the module depth shown (None: every operation);
      ``automatic`` when a layout chose it itself (``show_chosen_detail``): nothing to lay out;
    - ``hook_nodes_changed(bool)``: the nodes full backward hooks insert are shown;
    - ``tint_changed(bool)``: nodes coloured by the latest gradient norm;
    - ``trace_grads_changed(bool)``: traces record every op's gradient (and NaN/Inf's origin);
    - ``micro_batch_changed(int)``: which micro-batch (0-based) of a step of several a trace
      draws (its parameters show the step's accumulated gradient whichever it is).
    """

    layout_changed = Signal(str)
    detail_changed = Signal(object, bool)
    hook_nodes_changed = Signal(bool)
    tint_changed = Signal(bool)
    trace_grads_changed = Signal(bool)
    micro_batch_changed = Signal(int)

    def __init__(self, layout: str = DEFAULT_LAYOUT, detail: int | None = None, hook_nodes: bool = True,
                 tint: bool = True, trace_grads: bool = False) -> None:
        self._layout, self._detail = layout, detail
        self._hook_nodes, self._tint, self._trace_grads = hook_nodes, tint, trace_grads
        self._micro_batch = 0

    @property
    def layout(self) -> str:
        """The layout algorithm's name."""
        return self._layout

    @layout.setter
    def layout(self, name: str) -> None:
        if name != self._layout:
            self._layout = name
            self.layout_changed.emit(name)

    @property
    def detail(self) -> int | None:
        """The module depth shown, None for every operation; setting it is the user's choice."""
        return self._detail

    @detail.setter
    def detail(self, depth: int | None) -> None:
        self._set_detail(depth, automatic=False)

    def show_chosen_detail(self, depth: int | None) -> None:
        """The depth a layout chose itself (a readable first view): recorded, not laid out again."""
        self._set_detail(depth, automatic=True)

    def _set_detail(self, depth: int | None, automatic: bool) -> None:
        if depth != self._detail:
            self._detail = depth
            self.detail_changed.emit(depth, automatic)

    @property
    def hook_nodes(self) -> bool:
        """Whether the nodes full backward hooks insert (BackwardHookFunctionBackward) are shown."""
        return self._hook_nodes

    @hook_nodes.setter
    def hook_nodes(self, on: bool) -> None:
        if bool(on) != self._hook_nodes:
            self._hook_nodes = bool(on)
            self.hook_nodes_changed.emit(self._hook_nodes)

    @property
    def tint(self) -> bool:
        """Whether nodes are coloured by the latest gradient norm (else by kind)."""
        return self._tint

    @tint.setter
    def tint(self, on: bool) -> None:
        if bool(on) != self._tint:
            self._tint = bool(on)
            self.tint_changed.emit(self._tint)

    @property
    def trace_grads(self) -> bool:
        """Whether a trace records the gradient through every op (a hooked backward pass)."""
        return self._trace_grads

    @trace_grads.setter
    def trace_grads(self, on: bool) -> None:
        if bool(on) != self._trace_grads:
            self._trace_grads = bool(on)
            self.trace_grads_changed.emit(self._trace_grads)

    @property
    def micro_batch(self) -> int:
        """Which micro-batch (0-based) of a step of several a gradient trace draws."""
        return self._micro_batch

    @micro_batch.setter
    def micro_batch(self, index: int) -> None:
        if int(index) != self._micro_batch:
            self._micro_batch = int(index)
            self.micro_batch_changed.emit(self._micro_batch)

    @property
    def trace_choice(self) -> tuple[bool, int]:
        """What a trace asks for: ``(trace_grads, micro_batch)``."""
        return self._trace_grads, self._micro_batch
