"""What the user has selected, shared by every view: a graph node, module or parameter, the
step shown (None: live, the newest) and the run it belongs to (None: the window's own).

Every view reads and writes this one model (issue 40): the tree, table, graph, details pane,
histogram, heat map, Distributions tiles, Ledger, Optimizer tab and Spikes. A click on a spike,
a heat-map column, a ledger point or a curve point sets ``step``; ``go_live`` (End, or the
toolbar's "Live") clears it. Picking another parameter keeps the step.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from psygnal import Signal

from gradexplorer.core.model.membership import module_parameters

KEEP = object()  # ``select``'s step and run: unchanged


@dataclass(frozen=True)
class Selection:
    """A selected thing; any field may be empty. ``source`` names the view that set it;
    ``step`` is the step every view shows (None: live, each view's newest); ``run`` names the
    run the selection is of (None: the window's own, the live session or the run shown)."""

    node: object = None
    module: str | None = None
    param: str | None = None
    source: str = ""
    step: int | None = None
    run: str | None = None

    @property
    def live(self) -> bool:
        """Whether the views follow the newest step."""
        return self.step is None


class SelectionModel:
    """Holds the current selection and announces changes (``changed(Selection)``; also
    ``step_changed(step)`` when the step shown changed, None when back to live)."""

    changed = Signal(object)
    step_changed = Signal(object)

    def __init__(self) -> None:
        self.current = Selection()

    def select(self, node=None, module: str | None = None, param: str | None = None,
               source: str = "", step=KEEP, run=KEEP) -> None:
        """Make a new selection (views ignore changes whose ``source`` is themselves); the step
        and run stay as they are unless given."""
        old = self.current
        self._set(Selection(node, module, param, source, old.step if step is KEEP else step,
                            old.run if run is KEEP else run))

    def select_step(self, step: int | None, source: str = "", run=KEEP) -> None:
        """Show ``step`` in every view (None: live), the same node, module and parameter."""
        old = self.current
        self._set(replace(old, source=source, step=None if step is None else int(step),
                          run=old.run if run is KEEP else run))

    def go_live(self, source: str = "") -> None:
        """Every view back to the newest step."""
        if self.current.step is not None:
            self.select_step(None, source)

    def clear(self) -> None:
        """Select nothing (the step shown stays)."""
        self.select()

    def _set(self, selection: Selection) -> None:
        if selection == self.current:
            return
        old, self.current = self.current, selection
        self.changed.emit(selection)
        if old.step != selection.step:
            self.step_changed.emit(selection.step)


def parameter_for(selection: Selection, model) -> str | None:
    """The parameter every view shows for a selection: the selected one, else the first of the
    module's own and its submodules' parameters (``core.model.membership``)."""
    if selection.param:
        return selection.param
    if selection.module is None or model is None:
        return None
    names = module_parameters((n for n, _ in model.named_parameters()), selection.module)
    return names[0] if names else None


def step_caption(shown: int | None, newest: int | None) -> str:
    """``step 401 of 1600`` for a step that is not the newest; ``""`` for the newest (or none)."""
    if shown is None or newest is None or shown == newest:
        return ""
    return f"step {shown} of {newest}"
