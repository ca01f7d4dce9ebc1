"""The colour key under the graph, and the graph panel's small widget helpers."""

from __future__ import annotations

from PySide6.QtWidgets import QComboBox, QLabel


def shrinkable(box: QComboBox, chars: int) -> None:
    """Let a combo box narrow to ``chars`` characters (an 800-pixel window fits the row)."""
    box.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
    box.setMinimumContentsLength(chars)


def legend_label() -> QLabel:
    """The colour key under the graph."""
    from gradexplorer.core.graph.style import HOOK_MARK, KIND_FILL
    from gradexplorer.gui.theme import ALARM, SELECTION

    def swatch(colour: str, text: str, ring: bool | str = False) -> str:
        # a key never breaks inside its own words, nor after a slash or an arrow ("NaN/" | "Inf")
        text = text.replace(" ", "&nbsp;").replace("/", "/\u2060").replace("→", "\u2060→\u2060")
        if ring:
            mark = "◎" if ring == "double" else "▢"
            return f"<b style='color:{colour}'>{mark}</b>&nbsp;{text}&nbsp;&nbsp; "
        return f"<span style='background:{colour}'>&nbsp;&nbsp;&nbsp;&nbsp;</span>&nbsp;{text}&nbsp;&nbsp; "

    kinds = (("op", "operation"), ("param", "parameter"), ("hook", "hook node"), ("loss", "loss"),
             ("module", "module"))
    text = "".join(swatch(KIND_FILL[k], label) for k, label in kinds)
    text += (swatch("#ffb74d", "tint: |g| low→high") + swatch("#e0e0e0", "no gradient")
             + swatch("#b39ddb", "NaN/Inf")
             + swatch(ALARM, "NaN/Inf born here", "double")
             + swatch(HOOK_MARK, "hooked", True) + swatch(SELECTION, "selected", True))
    label = QLabel(text)
    label.setToolTip("tint: each node coloured by the latest gradient norm of the parameters "
                     "behind it (Trace gradients: by the gradient the op itself sent on); a "
                     "gradient holding NaN or ±Inf is violet, never a heat colour")
    label.setObjectName("legend")
    label.setContentsMargins(6, 1, 6, 1)
    label.setWordWrap(True)
    return label
