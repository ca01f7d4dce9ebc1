"""What the user has selected: one graph node, module or parameter, shared by every view."""

from __future__ import annotations

from dataclasses import dataclass

from psygnal import Signal

from gradexplorer.core.model.membership import module_parameters


@dataclass(frozen=True)
class Selection:
    """A selected thing; any field may be empty. ``source`` names the view that set it."""

    node: object = None
    module: str | None = None
    param: str | None = None
    source: str = ""


class SelectionModel:
    """Holds the current selection and announces changes (``changed(Selection)``)."""

    changed = Signal(object)

    def __init__(self) -> None:
        self.current = Selection()

    def select(self, node=None, module: str | None = None, param: str | None = None,
               source: str = "") -> None:
        """Make a new selection (views ignore changes whose ``source`` is themselves)."""
        selection = Selection(node, module, param, source)
        if selection == self.current:
            return
        self.current = selection
        self.changed.emit(selection)

    def clear(self) -> None:
        """Select nothing."""
        self.select()


def parameter_for(selection: Selection, model) -> str | None:
    """The parameter every view shows for a selection: the selected one, else the first of the
    module's own and its submodules' parameters (``core.model.membership``)."""
    if selection.param:
        return selection.param
    if selection.module is None or model is None:
        return None
    names = module_parameters((n for n, _ in model.named_parameters()), selection.module)
    return names[0] if names else None
