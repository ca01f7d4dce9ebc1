"""What the user has selected: one graph node, module or parameter, shared by every view."""

from __future__ import annotations

from dataclasses import dataclass

from psygnal import Signal


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
