"""The one look of a backward graph: palette, node labels and node sizes.

Used by the app's canvas (and so by its PNG export and ``gradexplorer graph --out x.png``),
by the SVG and DOT exports and by the layouts, so every picture of a graph matches the window.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# -- palette: light fills (labels are dark text), one border colour, edges, marks ----------
KIND_FILL = {
    "op": "#b0bec5",
    "param": "#a5d6a7",
    "hook": "#e1bee7",
    "loss": "#80deea",
    "module": "#90caf9",
    "other": "#eceff1",
}
BORDER_COLOUR = "#455a64"
EDGE_COLOUR = "#9aa9b1"
TEXT_COLOUR = "#17252c"
HOOK_MARK = "#8e24aa"  # ring around the nodes of a hooked module

# -- geometry: the app's boxes (scene units) and the exports' (pixels) -------------------
NODE_W, NODE_H = 190.0, 44.0  # the app: fixed boxes, two lines of 16 px text
NODE_HEIGHT = 34.0  # exports and layered layouts: boxes as wide as their text
CHAR_WIDTH = 6.6  # of the 11 px monospace font the exports use
PADDING = 8.0
LAYER_STEP = 58.0  # vertical distance between layers
FONT_SIZE = 11


def format_shape(shape: Any) -> str:
    """``(4, 8)`` as ``4×8``; scalars as ``()``."""
    if shape is None:
        return ""
    return "×".join(str(d) for d in shape) if len(shape) else "()"


def node_lines(attrs: Mapping[str, Any]) -> tuple[str, str]:
    """The two text lines of a node: what it is, and where it comes from."""
    kind = attrs.get("kind", "other")
    if kind == "module":
        members = attrs.get("members")
        detail = " · ".join(t for t in (attrs.get("name"), f"{members} nodes" if members else "") if t)
        return attrs.get("module") or "(model)", detail
    if kind == "hook":  # BackwardHookFunctionBackward, inserted by a full backward hook
        return "backward hook", attrs.get("module") or ""
    if kind == "param":
        return attrs.get("param") or "AccumulateGrad", format_shape(attrs.get("shape") or ())
    return str(attrs.get("name", "?")), attrs.get("module") or ""


def node_label(attrs: Mapping[str, Any]) -> str:
    """A node's first line: its name where one line must do (DOT labels, search)."""
    return node_lines(attrs)[0]


def node_tooltip(attrs: Mapping[str, Any]) -> str:
    """Details shown on hover: op, module, parameter shape, saved tensors."""
    lines = [node_label(attrs)]
    if attrs.get("kind") == "module":
        lines.append(f"{attrs.get('members', 0)} nodes collapsed")
    else:
        if attrs.get("name") and attrs.get("name") != lines[0]:
            lines.append(str(attrs["name"]))
        lines.append(f"module: {attrs.get('module') or '(root)'}")
    if attrs.get("shape") is not None:
        lines.append(f"shape: {format_shape(attrs['shape'])} {attrs.get('dtype') or ''}".rstrip())
    for key, shape in (attrs.get("saved") or {}).items():
        lines.append(f"saved {key}: {format_shape(shape)}")
    return "\n".join(lines)


def node_width(attrs: Mapping[str, Any]) -> float:
    """Drawn width of a node in the exports: its longer line plus padding."""
    return max(len(line) for line in node_lines(attrs)) * CHAR_WIDTH + 2 * PADDING
