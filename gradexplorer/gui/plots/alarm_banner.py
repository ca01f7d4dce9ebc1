"""A red line that appears when gradients hold NaN or Inf, naming where."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QLabel, QWidget


def alarm_text(gradients: Any) -> str:
    """The alarm line for one StepGradients, or "" when every gradient is finite."""
    bad = {n: s for n, s in gradients.params.items() if s.nan_count or s.inf_count}
    if not bad:
        return ""
    names = ", ".join(f"{n} ({s.nan_count} NaN, {s.inf_count} Inf)" for n, s in list(bad.items())[:3])
    more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
    return f"⚠ step {gradients.step}: non-finite gradients in {names}{more}"


class AlarmBanner(QLabel):
    """Hidden while all is well."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("alarm")
        self.setWordWrap(True)
        self.hide()

    def show_gradients(self, gradients: Any) -> None:
        """Show or hide the alarm for the newest step."""
        text = alarm_text(gradients) if gradients is not None else ""
        self.setText(text)
        self.setVisible(bool(text))
