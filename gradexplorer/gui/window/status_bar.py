"""The status bar: run state, step, loss, steps per second and the latest note."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QStatusBar, QWidget

from gradexplorer.gui.session.controller import PAUSED, RUNNING, SessionController
from gradexplorer.gui.throttle import throttled

MODEL_TEXT_PX = 360  # the model or run named in at most this many pixels (the tooltip has it all)
REDRAW_MS = 100  # step, loss and rate labels at most 10 times a second


def run_progress(step: int, span: tuple[int, int] | None, rate: float, running: bool) -> str:
    """``step 57 · 17 of 20 · ~2 s left`` during Run N, else ``step 57``."""
    if not running or span is None:
        return f"step {step}"
    start, total = span
    done = min(max(step - start, 0), total)
    text = f"step {step} · {done} of {total}"
    if rate > 0 and done < total:
        left = (total - done) / rate
        minutes, seconds = divmod(round(left), 60)
        text += f" · ~{left:.0f} s left" if left < 90 else f" · ~{minutes} min {seconds:02d} s left"
    return text


def trace_notes(attrs: dict) -> tuple[str, str] | None:
    """What a traced graph's attributes (``replayed``, ``step``, ``forward_origin``) tell the
    reader: ``(short, full)`` — a short line that reads whole in a 1024-px window's status bar
    and the full sentence (tooltip, event log) — or None when there is nothing to say."""
    short, full = [], []
    if attrs.get("replayed"):
        step, k = attrs["step"] + 1, attrs.get("micro_batches")
        part = f", micro-batch {attrs['micro_batch'] + 1} of {k}" if k else ""
        short.append(f"traced: replay of step {step}{part} (its NaN/Inf origin)")
        full.append(f"gradients traced on a replay of step {step}, the first step whose gradient "
                    f"held NaN/Inf{part and f' ({part[2:]}, where it was born)'}")
    if attrs.get("forward_origin"):
        short.append("NaN/Inf born in the forward pass (see Events)")
        full.append(attrs["forward_origin"])
    return (" · ".join(short), " · ".join(full)) if short else None


class SteadyLabel(QLabel):
    """A status label that only grows: a figure that gets shorter (step 10 · 3 of 20 · ~2 s left
    → step 20) keeps its place, so the labels left of it do not jump as steps arrive."""

    def setText(self, text: str) -> None:  # noqa: N802 - Qt API
        super().setText(text)
        self.setMinimumWidth(max(self.minimumWidth(), self.sizeHint().width()))

    def forget(self) -> None:
        """A new model: sized afresh."""
        self.setMinimumWidth(0)


class RunStatusBar(QStatusBar):
    """Observes the controller; shows numbers, never stores them."""

    def __init__(self, controller: SessionController, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.controller = controller
        self.model_label = QLabel("no model")
        self.model_label.setMaximumWidth(MODEL_TEXT_PX)  # a long spec never widens the window
        self.state_label = SteadyLabel("idle")
        self.step_label = SteadyLabel("step 0")
        self.loss_label = SteadyLabel("loss —")
        self.rate_label = SteadyLabel("— steps/s")
        for label in (self.model_label, self.state_label, self.step_label, self.loss_label,
                      self.rate_label):
            label.setTextFormat(Qt.PlainText)  # a spec or name shown as written, never markup
            self.addPermanentWidget(label)
        self._run_state: str | None = None
        self.refresh_soon = throttled(self.show_latest, timeout=REDRAW_MS, parent=self)
        controller.session.state_changed.connect(self.show_state)
        controller.timeline.changed.connect(self.refresh_soon)
        controller.session.model_opened.connect(self.reset)
        controller.session.opened.connect(self.show_session)
        controller.session.message.connect(lambda text: self.showMessage(text, 8000))
        controller.session.error.connect(lambda text: self.showMessage(f"error: {text}", 15000))

    def message_room(self) -> int:
        """Pixels a message has: left of the first shown permanent label (as QStatusBar draws it)."""
        right = self.width() - 12
        shown = [w for w in (self.model_label, self.state_label, self.step_label, self.loss_label,
                             self.rate_label) if w.isVisible()]
        if shown:
            right = min(right, min(w.x() for w in shown) - 2)
        return max(right - 6, 0)

    def show_note(self, short: str, full: str) -> None:
        """``short`` in the message area (cut to its room only if a window is narrower still),
        ``full`` in the tooltip until the message goes."""
        metrics = self.fontMetrics()
        self.showMessage(metrics.elidedText(short, Qt.ElideRight, self.message_room()))
        self.setToolTip(full)
        self.messageChanged.connect(self._drop_note_tip, Qt.SingleShotConnection)

    def _drop_note_tip(self, _text: str = "") -> None:
        self.setToolTip("")

    def show_state(self, state: str) -> None:
        """The run state; the step label drops its "k of N" once a run ends."""
        if self._run_state is None:  # a followed run shown: its own state stays
            self.state_label.setText(state)
        self.refresh_soon()

    def reset(self, _live=None) -> None:
        """A new model: no step, loss or rate of the last one."""
        for label in (self.state_label, self.step_label, self.loss_label, self.rate_label):
            label.forget()
        self.step_label.setText("step 0")
        self.loss_label.setText("loss —")
        self.rate_label.setText("— steps/s")
        self._run_state = None
        self.clearMessage()

    def show_session(self, live) -> None:
        """Name the model and device."""
        session = live.session
        self._name(str(live.spec), f" · {session.parameter_count():,} params · {session.device}")
        self.step_label.setText(f"step {session.step_count}")

    def show_run(self, name: str, state: str) -> None:
        """Name the run shown and its state (waiting for its writer, following, finished)."""
        self._run_state = state
        self._name(str(name), "", "run ")
        self.state_label.setText(state)
        if state != "following":  # finished, stopped, waiting: no rate of steps now
            self.rate_label.setText("— steps/s")

    def _name(self, name: str, after: str = "", before: str = "") -> None:
        """``before + name + after`` in the label's room (less its style sheet's padding: the
        device read "cp"), ``name`` (a path, a spec) shortened from the left so that its file
        and what follows it stay."""
        label = self.model_label
        label.ensurePolished()
        margins, metrics = label.contentsMargins(), label.fontMetrics()
        room = MODEL_TEXT_PX - margins.left() - margins.right() - 2
        room -= metrics.horizontalAdvance(before + after)
        folders = name.split("/")  # whole folders go first: "…/gpt2_small.py:build", not "…ples/gpt2…"
        shorter = (f"…/{'/'.join(folders[i:])}" for i in range(1, len(folders)))
        fits = next((t for t in shorter if metrics.horizontalAdvance(t) <= room), None)
        if metrics.horizontalAdvance(name) <= room:
            fits = name
        label.setText(before + (fits or metrics.elidedText(name, Qt.ElideLeft, max(room, 0))) + after)
        label.setToolTip(before + name + after)

    def show_latest(self) -> None:
        """Show the timeline's newest step."""
        timeline = self.controller.timeline
        latest = timeline.latest
        if latest is None:
            return
        self.step_label.setText(run_progress(latest.step, self.controller.run_span,
                                             timeline.steps_per_second,
                                             self.controller.session.state in (RUNNING, PAUSED)))
        self.loss_label.setText(f"loss {latest.loss:.4g}" if latest.loss_known else "loss —")
        rate = timeline.steps_per_second  # 0 until two steps fall in the rate window
        if self._run_state not in (None, "following"):
            rate = 0.0  # a run no longer written: its last rate is no rate
        self.rate_label.setText(f"{rate:.1f} steps/s" if rate > 0 else "— steps/s")
