"""The Ledger's figures of one optimizer step as a compact two-column grid: a short name (its
meaning one hover away) beside each value, the values wrapped to the room there is, so that the
figures read whole in a 1024×700 window without a horizontal scroll bar (as ``label: value``
lines they needed both scroll bars there). ``text()`` gives them as those lines (copy, tests)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QGridLayout, QLabel, QSizePolicy, QWidget

from gradexplorer.gui.text.number_text import format_number

# (line's label, short name, what the figure is): the short name is what the grid shows
NAMES = {
    "run": ("run", "the run these figures are of (runs overlaid: the reference run)"),
    "optimizer step": ("step", "the optimizer step (optimizer.step() calls so far)"),
    "iteration (backward passes)": ("iteration", "backward passes so far (micro-batches included)"),
    "micro-batches": ("micro-batches", "backward passes accumulated into this step"),
    "loss (mean of micro-batches)": ("loss", "the loss, the mean of the step's micro-batches"),
    "global norm as accumulated": ("‖g‖ accum.", "the global gradient norm as accumulated: .grad "
                                   "after the last backward, before unscale and clip (÷ scale: "
                                   "divided by the GradScaler's scale)"),
    "global norm as applied": ("‖g‖ applied", "the global gradient norm the optimizer used: "
                               "after unscale and clip (every other figure in the app is of it)"),
    "clip coef": ("clip coef", "max_norm / ‖g‖ of clip_grad_norm_ (clipped when below 1)"),
    "scale": ("scale", "the GradScaler's scale at this step"),
    "skipped": ("skipped", "whether the optimizer skipped this step, and why"),
    "NaN/Inf in the gradient": ("NaN/Inf", "NaN and Inf elements in the step's gradient"),
    "lr": ("lr", "the learning rate of each parameter group"),
}


WIDEST = "1.23457e-05,"  # the widest word of a value: a number in 6 digits (and a comma)


def number(value, digits: int = 6) -> str:
    """``—`` for unknown, else the app's compact number."""
    return "—" if value is None else format_number(value, digits)


def ledger_rows(ledger, summary: dict | None = None) -> list[tuple[str, str]]:
    """The step's ledger as ``(label, value)`` rows; a row whose label is "" is a note."""
    if ledger is None:
        return [("", "no step yet")]
    skipped = "yes" + (f" ({ledger.skip_reason})" if ledger.skip_reason else "") \
        if ledger.skipped else "no"
    acc = ledger.grad_norm_accumulated
    rows = [("optimizer step", str(ledger.optimizer_step)),
            ("iteration (backward passes)", number(ledger.iteration)),
            ("micro-batches", number(ledger.micro_batches)),
            ("loss (mean of micro-batches)", number(ledger.loss)),
            ("global norm as accumulated", number(acc) + (
                f" (÷ scale: {number(acc / ledger.scale)})" if ledger.scale and acc is not None else "")),
            ("global norm as applied", number(ledger.grad_norm_applied)),
            ("clip coef", number(ledger.clip_coef) + (
                "" if ledger.clipped is None else (" (clipped)" if ledger.clipped else " (not clipped)"))),
            ("scale", "none (no GradScaler)" if ledger.scale is None else number(ledger.scale)),
            ("skipped", skipped)]
    if ledger.nan_count or ledger.inf_count:
        rows.append(("NaN/Inf in the gradient", f"{ledger.nan_count}/{ledger.inf_count}"))
    if ledger.lr:
        rows.append(("lr", ", ".join(format_number(v, 4) for v in ledger.lr)))
    if summary is not None:
        rows.append(rolling_row(summary))
    return rows


def rolling_row(summary: dict) -> tuple[str, str]:
    """``("last 100 steps", "clipped 12% · 1 skipped")``."""
    rate = summary["clip_rate"]
    clip = "clip rate —" if rate is None else f"clipped {rate:.0%}"
    return f"last {summary['steps']} steps", f"{clip} · {summary['skipped']} skipped"


def ledger_lines(ledger, summary: dict | None = None) -> list[str]:
    """The step's ledger as ``label: value`` lines (plain text)."""
    return [f"{label}: {value}" if label else value for label, value in ledger_rows(ledger, summary)]


def short_name(label: str) -> tuple[str, str]:
    """(the grid's name, its tooltip) of a row's label."""
    if label.startswith("last "):  # the rolling summary: "last 100 steps"
        return label.removesuffix(" steps"), f"clip rate and skipped steps over the {label}"
    short, tip = NAMES.get(label, (label, ""))
    return short, f"{label}: {tip}" if tip else label


class LedgerFigures(QWidget):
    """``show_rows(rows)`` shows ``(label, value)`` rows (``ledger_rows``): short names in a
    column, values wrapped beside them (in one or two such pairs: ``set_columns``); a note
    (label "") spans its pair."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.rows: list[tuple[str, str]] = []
        self.grid = QGridLayout(self)
        self.grid.setContentsMargins(0, 0, 2, 0)
        self.grid.setHorizontalSpacing(6)
        self.grid.setVerticalSpacing(1)
        self.columns = 1
        self.cells: list[tuple[QLabel, QLabel]] = []
        self.show_rows([("", "no step yet")])

    def least_width(self) -> int:
        """Pixels that show the widest short name beside the widest number whole (a value's
        words wrap, a number is never cut): fixed by the font, so the figures' least width
        never changes with what they show."""
        advance = self.fontMetrics().horizontalAdvance
        names = max(advance(short) for short, _tip in NAMES.values())
        margins = self.grid.contentsMargins()
        return names + self.grid.horizontalSpacing() + advance(WIDEST) + margins.left() \
            + margins.right() + 4

    def text(self) -> str:
        """The figures as ``label: value`` lines."""
        return "\n".join(f"{label}: {value}" if label else value for label, value in self.rows)

    def _cell_pair(self, row: int) -> tuple[QLabel, QLabel]:
        while len(self.cells) <= row:
            name, value = QLabel(self), QLabel(self)
            name.setTextFormat(Qt.PlainText)
            value.setTextFormat(Qt.PlainText)
            value.setWordWrap(True)  # a long value wraps in its column, never widens the dock
            value.setTextInteractionFlags(Qt.TextSelectableByMouse)
            value.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
            value.setMinimumWidth(self.fontMetrics().horizontalAdvance(WIDEST))
            self.cells.append((name, value))
        return self.cells[row]

    def set_columns(self, columns: int) -> None:
        """Lay the rows out in ``columns`` pairs of columns (a wide Ledger: two, so that its
        figures need no scrolling in a short dock)."""
        if columns != self.columns:
            self.columns = columns
            self._place()

    def _place(self) -> None:
        count = len(self.rows)
        per = max(1, -(-count // self.columns))  # rows in each pair of columns
        for index, (name, value) in enumerate(self.cells):
            self.grid.removeWidget(name)
            self.grid.removeWidget(value)
            if index >= count:
                continue
            row, pair = index % per, 2 * (index // per)
            name.setIndent(10 if pair else 0)  # the second pair set apart from the first
            if self.rows[index][0]:
                self.grid.addWidget(name, row, pair, Qt.AlignTop | Qt.AlignLeft)
                self.grid.addWidget(value, row, pair + 1, Qt.AlignTop)
            else:  # a note across its pair
                self.grid.addWidget(value, row, pair, 1, 2, Qt.AlignTop)
        for row in range(self.grid.rowCount()):  # the rows at the top, the room left below them
            self.grid.setRowStretch(row, 0)
        self.grid.setRowStretch(per, 1)
        for column in range(max(4, self.grid.columnCount())):
            self.grid.setColumnStretch(column, 1 if column % 2 and column < 2 * self.columns else 0)

    def show_rows(self, rows: list[tuple[str, str]]) -> None:
        if rows == self.rows:
            return
        self.rows = list(rows)
        for index, (label, value) in enumerate(rows):
            name, shown = self._cell_pair(index)
            short, tip = short_name(label) if label else ("", "")
            name.setText(short)
            name.setToolTip(tip)
            name.setVisible(bool(label))
            shown.setText(value)
            shown.setToolTip(tip)
            shown.setVisible(True)
        for name, shown in self.cells[len(rows):]:
            name.setVisible(False)
            shown.setVisible(False)
        self._place()
