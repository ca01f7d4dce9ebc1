"""A training session together with the observers the app attaches to it (Qt-free).

Imported by the training thread's first open job, never by the window at start: it imports
torch (see ``build_session`` and ``open_live_session`` for the order of a first open)."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

import torch

from gradexplorer.core.diagnose.spike_observer import SpikeObserver
from gradexplorer.core.hooks import HookRegistry, hookable_modules
from gradexplorer.core.hooks.observed import ObserveReporter
from gradexplorer.core.model.spec import ModelOptions, load_workload
from gradexplorer.core.session.devices import available_devices, unavailable_devices
from gradexplorer.core.session.engine import SessionConfig, TrainingSession
from gradexplorer.core.stack.assembly import SessionStack
from gradexplorer.core.stats.monitor import GradientMonitor, warm_up
from gradexplorer.core.watch.session_noise import SessionNoise
from gradexplorer.gui.training.optimizer_reporter import OptimizerStateReporter


@dataclass
class LiveSession:
    """The session the app drives, its gradient monitor and its hook registry."""

    session: TrainingSession
    spec: str
    options: ModelOptions
    monitor: GradientMonitor
    hooks: HookRegistry
    hookable: dict[str, tuple[bool, str]] | None = None  # path -> (safe, reason); None: unprobed
    devices: tuple[list[str], dict[str, str]] | None = None  # available, absent kind -> why
    stack: SessionStack | None = None  # the session's one observer (set when opened)

    @property
    def config(self) -> SessionConfig:
        """How the session trains."""
        return self.session.config


def build_session(
    spec: str, options: ModelOptions, config: SessionConfig, holder: object = None,
) -> TrainingSession:
    """The first half of opening ``spec``: the model built on its device, its optimizer not
    yet (its set-up, the statistics warm-up, takes a while at a first open: the app draws
    the model's first graph from this session meanwhile)."""
    leave_gui_a_core(holder)
    return TrainingSession(load_workload(spec, options), config)


def open_live_session(
    spec: str, options: ModelOptions, config: SessionConfig, bins: int = 64,
    histogram_every: int = 1, holder: object = None, session: TrainingSession | None = None,
) -> LiveSession:
    """Load ``spec`` (or finish ``session``, from ``build_session``) and build a session with
    its optimizer, a gradient monitor and a hook registry, torch's lazy machinery set up
    (``holder``: who gives the cores back, see ``give_cores_back``)."""
    session = session or build_session(spec, options, config, holder)
    prepare_training_thread(holder)
    session.optimizer  # noqa: B018 - built here, on the training thread
    monitor = GradientMonitor(bins=bins, histogram_every=histogram_every)
    inputs = session.batch(0)[0]
    hooks = HookRegistry(session.model, seed=config.seed, sample_inputs=inputs)
    live = LiveSession(session, spec, options, monitor, hooks,
                       devices=(available_devices(), unavailable_devices()))
    _attach(live)
    return live


def probe_hookable(live: LiveSession) -> dict[str, tuple[bool, str]]:
    """Which modules take a full backward hook safely (a forward pass with probes: on the
    training thread, after the first view is drawn, since it costs a second on big models)."""
    inputs = live.session.batch(0)[0]
    return {row.path: (row.safe, row.reason) for row in hookable_modules(live.session.model, inputs)}


_THREADS: dict[str, Any] = {"before": None, "holders": set()}  # torch's count, who lowered it


def prepare_training_thread(holder: object = None) -> None:
    """On the training thread: leave the GUI a core (for ``holder``) and build torch's first
    optimizers and statistics (``warm_up``), while a model opens instead of during the first
    step. Numba's statistics kernels are readied off the training thread from the first step
    on (``backends.warmup``; the torch backend measures meanwhile), not while the app starts.

    With every core busy in torch's intra-op pool the GUI thread waits for CPU time and the
    window stutters.
    """
    leave_gui_a_core(holder)
    _warm_up_once()


@cache
def _warm_up_once() -> None:
    warm_up(backend="torch")  # Numba's kernels readied from the first step on (stats_warmup)


def leave_gui_a_core(holder: object = None) -> None:
    """Lower torch's intra-op threads to one fewer than the cores while ``holder`` (the
    window's controller) needs it: on this thread, and (torch keeps the count process-wide)
    on every thread started later; ``give_cores_back`` restores the process's own count."""
    cores = os.cpu_count() or 1
    if _THREADS["before"] is None and cores > 1 and torch.get_num_threads() >= cores:
        _THREADS["before"] = torch.get_num_threads()
        torch.set_num_threads(cores - 1)
    if _THREADS["before"] is not None:
        _THREADS["holders"].add(id(holder))


def give_cores_back(holder: object = None) -> None:
    """``holder`` is done (its training thread has ended): once no holder is left, torch gets
    back the thread count the process had, so nothing of the app stays in the process."""
    _THREADS["holders"].discard(id(holder))
    if _THREADS["before"] is not None and not _THREADS["holders"]:
        torch.set_num_threads(_THREADS["before"])
        _THREADS["before"] = None


def reconfigure(live: LiveSession, **changes: Any) -> LiveSession:
    """The same model and hooks under a new device or optimizer; the step count carries on,
    and so does a periodic export (the old stack's publishers)."""
    config = replace(live.session.config, **changes)
    session = TrainingSession(live.session.workload, config)
    session.optimizer  # noqa: B018 - built here, on the training thread
    session.step_count, session.micro_drawn = live.session.step_count, live.session.micro_drawn
    live.session.remove_observer(live.stack)
    for part in live.stack.reporters if live.stack is not None else ():
        if isinstance(part, SessionNoise):  # its hooks off the model: the new stack has its own
            part.remove()
    live.hooks.uninstall(live.session)
    new = LiveSession(session, live.spec, live.options, live.monitor, live.hooks, live.hookable,
                      live.devices)
    old = live.stack
    _attach(new, old.publishers if old is not None else (), old.events if old is not None else None)
    return new


def _attach(live: LiveSession, publishers=(), events=None) -> None:
    """The app's session stack (``core/stack/assembly.py``): the monitor, the hooks, where a
    NaN/Inf was born, spikes, what observe hooks saw, the optimizer's state. Its bus
    (``stack.events``, ``core/stack/events.py``) tells every event: hook events, the NaN
    origin, a spike's beginning, a snapshot written, a failure (the controller hands them to
    the mailbox); ``events``: the bus of the stack this one replaces, kept with its subscribers."""
    stack = live.stack = SessionStack.on(live.session, live.monitor, live.hooks,
                                         publishers=tuple(publishers), events=events)
    stack.reporters += [
        SpikeObserver(report=stack.tell),  # its failure: a warning and a red line in the log
        ObserveReporter(live.hooks, live.monitor.bins),  # plain records in each result
        OptimizerStateReporter(),  # ‖m‖, RMS √v̂, eff. lr, ‖momentum‖
    ]
    SessionNoise.on(live.session, stack)  # ≥ 2 micro-batches a step: B_simple, SNR (result.noise)
