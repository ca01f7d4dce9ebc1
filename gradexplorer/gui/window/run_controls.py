"""The run toolbar: Step, Run N, Run/Pause, Stop, device, optimizer, learning rate, cadence."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QLabel,
    QSpinBox,
    QToolBar,
    QToolButton,
    QWidget,
)

from gradexplorer.core.session.config import DEFAULT_LR, MAX_ACCUMULATE, OPTIMIZERS
from gradexplorer.gui.session.controller import IDLE, LOADING, PAUSED, RUNNING, SessionController
from gradexplorer.gui.theme import icon


def make_action(parent, text: str, icon_name: str, shortcut: str | None, slot) -> QAction:
    """A toolbar/menu action with an icon, a shortcut shown in its tooltip, and a slot."""
    action = QAction(icon(icon_name), text, parent)
    if shortcut:
        action.setShortcut(QKeySequence(shortcut))
        action.setToolTip(f"{text} ({QKeySequence(shortcut).toString()})")
    action.triggered.connect(slot)
    return action


def device_chooser(available: list[str] = (), absent: dict[str, str] | None = None) -> QComboBox:
    """Present devices to choose from, then absent kinds greyed out with the reason why (the
    window lists them once its first model opens: asking torch is the training thread's job)."""
    box = QComboBox(toolTip="device the model trains on")
    if available:
        list_devices(box, available, absent or {})
    return box


def list_devices(box: QComboBox, available: list[str], absent: dict[str, str]) -> None:
    """Fill ``box`` with the ``available`` devices, then the ``absent`` kinds greyed out."""
    box.clear()
    box.addItems(available)
    for kind, reason in absent.items():
        box.addItem(f"{kind} (unavailable)")
        index = box.count() - 1
        box.setItemData(index, reason, Qt.ToolTipRole)
        item = box.model().item(index)
        item.setFlags(item.flags() & ~Qt.ItemIsEnabled & ~Qt.ItemIsSelectable)
    lines = ["device the model trains on"] + [f"{kind}: {why}" for kind, why in absent.items()]
    box.setToolTip("\n".join(lines))


class RunControls(QToolBar):
    """Drives the controller; enables what makes sense in each run state."""

    def __init__(self, controller: SessionController, parent: QWidget | None = None) -> None:
        super().__init__("Run", parent)
        self.setObjectName("run_toolbar")
        self.controller = controller
        self.run_view = False  # a followed run is shown: nothing here may train the hidden model
        self.step_action = make_action(self, "Step", "step", "F6", self._typed_first(controller.step))
        self.run_n_action = make_action(self, "Run N", "run-n", "F7", self._run_n)
        self.run_action = make_action(self, "Run", "run", "F5", self._typed_first(controller.toggle_pause))
        self.stop_action = make_action(self, "Stop", "stop", "Shift+F5", controller.stop)
        self.steps_spin = self._spin(1, 1_000_000, 20, " steps", "steps for Run N")
        self.every_spin = self._spin(1, 10_000, 1, "", "record histograms every K steps")
        self.every_spin.setPrefix("every ")
        self.micro_spin = self._spin(1, MAX_ACCUMULATE, 1, "", "micro-batches a step (gradient "
                                     "accumulation: each loss ÷ k, one optimizer step; applies "
                                     "from the next step); 2 or more give the noise scale "
                                     "B_simple and each parameter's SNR (docs/noise.md)")
        self.micro_spin.setPrefix("micro-batches ")  # its own label: all of it or none in view
        self.device_box = device_chooser()
        self.devices_listed = False
        self.optimizer_box = QComboBox(toolTip="optimizer")
        self.optimizer_box.addItems(OPTIMIZERS)
        self.lr_spin = QDoubleSpinBox(decimals=6, minimum=1e-6, maximum=10.0, singleStep=0.001,
                                      toolTip="learning rate (applies from the next step)")
        self.lr_spin.setKeyboardTracking(False)
        self.lr_spin.setSpecialValueText("—")  # no model yet: not the minimum (0.000001) as if set
        self._layout_toolbar()
        self._show_overflow()
        self._connect()
        self.set_state(controller.session.state)

    @staticmethod
    def _spin(lo: int, hi: int, value: int, suffix: str, tip: str) -> QSpinBox:
        spin = QSpinBox(minimum=lo, maximum=hi, value=value, suffix=suffix, toolTip=tip)
        spin.setKeyboardTracking(False)
        return spin

    def _layout_toolbar(self) -> None:
        self.setToolButtonStyle(Qt.ToolButtonTextBesideIcon)
        for widget, most in ((self.steps_spin, 110), (self.device_box, 150),
                             (self.optimizer_box, 80), (self.lr_spin, 100), (self.every_spin, 90),
                             (self.micro_spin, 130)):
            widget.setMaximumWidth(most)  # the whole bar fits a 1024-pixel window
        for action in (self.step_action, self.run_n_action):
            self.addAction(action)
        self.addWidget(self.steps_spin)
        for action in (self.run_action, self.stop_action):
            self.addAction(action)
        self.addSeparator()
        self.session_settings = []  # the model session's settings: hidden while a run is shown
        self.spare_labels = []  # Device, Optimizer: the first to go where the bar is narrow
        for label, widget in (("Device", self.device_box), ("Optimizer", self.optimizer_box),
                              ("lr", self.lr_spin), ("", self.micro_spin),
                              ("Histograms", self.every_spin)):
            label = [self.addWidget(QLabel(f" {label} "))] if label else [self.addWidget(QLabel(" "))]
            if widget in (self.device_box, self.optimizer_box):
                self.spare_labels += label
            self.session_settings += [*label, self.addWidget(widget)]

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        self.fit_width()

    def fit_width(self) -> None:
        """Every control in view, none behind », wherever the bar allows: a bar narrower than
        all of it drops the Device and Optimizer labels first (their boxes read cpu, sgd), then
        the buttons' words (their icons stay; name and key in the tooltip). At 921 pixels, the
        app's first width on a 1024×700 screen, Micro-batches and Histograms are in view."""
        shown = not self.run_view
        for labels, style in ((True, Qt.ToolButtonTextBesideIcon), (False, Qt.ToolButtonTextBesideIcon),
                              (False, Qt.ToolButtonIconOnly)):
            for action in self.spare_labels:
                action.setVisible(shown and labels)
            self.setToolButtonStyle(style)
            if self.sizeHint().width() <= self.width():
                return

    def _show_overflow(self) -> None:
        """The » button that a narrow window shows for the controls that do not fit (Qt's own
        arrow is lost under the toolbar's padding)."""
        extension = self.findChild(QToolButton, "qt_toolbar_ext_button")
        if extension is not None:
            extension.setIcon(icon("more"))
            extension.setToolTip("more controls (the window is too narrow for all of them)")

    def _connect(self) -> None:
        c = self.controller
        c.session.state_changed.connect(self.set_state)
        c.session.opened.connect(self.show_session)
        self.device_box.activated.connect(lambda: c.reconfigure(device=self.device_box.currentText()))
        self.optimizer_box.activated.connect(self._optimizer_chosen)
        self.lr_spin.valueChanged.connect(c.set_lr)
        self.every_spin.valueChanged.connect(c.set_histogram_every)
        self.micro_spin.valueChanged.connect(c.set_accumulate)

    def commit_typed(self) -> None:
        """Take what is typed in the spin boxes (steps, lr, cadence) as their values: a key
        (F7) or a click on a tool button leaves the focus in the box, so nothing committed it
        and typing 8 then F7 ran the 20 shown before."""
        for spin in (self.steps_spin, self.lr_spin, self.every_spin, self.micro_spin):
            if spin.isEnabled() and spin.hasAcceptableInput():
                spin.interpretText()  # emits valueChanged (lr, cadence) when it differs

    def _typed_first(self, slot):
        def run(*_args) -> None:
            self.commit_typed()
            slot()
        return run

    def _run_n(self) -> None:
        self.commit_typed()
        self.controller.run(self.steps_spin.value())

    def _optimizer_chosen(self) -> None:
        name = self.optimizer_box.currentText()
        self.controller.reconfigure(optimizer=name, lr=DEFAULT_LR[name])

    def show_session(self, live) -> None:
        """Reflect a newly opened or reconfigured session's settings."""
        session = live.session
        if live.devices is not None and not self.devices_listed:
            self.devices_listed = True
            list_devices(self.device_box, *live.devices)
        for box, value in ((self.device_box, str(session.device)),
                           (self.optimizer_box, session.config.optimizer)):
            if box.findText(value) < 0:
                box.addItem(value)
            box.setCurrentText(value)
        self.lr_spin.blockSignals(True)
        self.lr_spin.setSpecialValueText("")  # a session's lr, the minimum included, as a figure
        self.lr_spin.setValue(session.optimizer.param_groups[0]["lr"])
        self.lr_spin.blockSignals(False)
        self.micro_spin.blockSignals(True)
        self.micro_spin.setValue(session.config.accumulate)
        self.micro_spin.blockSignals(False)
        if live.monitor is not None:
            self.every_spin.blockSignals(True)
            self.every_spin.setValue(int(getattr(live.monitor, "histogram_every", 1)))
            self.every_spin.blockSignals(False)

    def set_run_view(self, on: bool) -> None:
        """A run is shown (``on``): every training control off until a model is opened, and
        the model session's device, optimizer, lr and cadence hidden (they are not the run's)."""
        self.run_view = on
        for action in self.session_settings:
            action.setVisible(not on)
        self.fit_width()
        self.set_state(self.controller.session.state)

    def set_state(self, state: str) -> None:
        """Enable the controls that make sense in ``state``."""
        if self.run_view:
            for action in (self.step_action, self.run_n_action, self.run_action, self.stop_action):
                action.setEnabled(False)
            for widget in (self.device_box, self.optimizer_box, self.lr_spin, self.every_spin,
                           self.steps_spin, self.micro_spin):
                widget.setEnabled(False)
            return
        for widget in (self.lr_spin, self.every_spin, self.micro_spin):
            widget.setEnabled(True)
        self.steps_spin.setEnabled(self.controller.session.live is not None)  # no model: off with Run N
        idle = state == IDLE and self.controller.session.live is not None
        busy = state in (RUNNING, PAUSED)
        for action in (self.step_action, self.run_n_action):
            action.setEnabled(idle)
        self.run_action.setEnabled(idle or busy)
        self.stop_action.setEnabled(busy)
        running = state == RUNNING
        self.run_action.setIcon(icon("pause" if running else "run"))
        self.run_action.setText("Pause" if running else ("Resume" if state == PAUSED else "Run"))
        for widget in (self.device_box, self.optimizer_box):
            widget.setEnabled(idle)
        self.setEnabled(state != LOADING)
