"""Attach and detach full backward hooks by module path, keeping every handle, and recover
from the errors hooks cause during a step. The hooks see every tensor input, positional or
keyword (``register_all_inputs_hook``).

The registry is thread-confined: attach/detach it only where the model trains between steps
(the app posts them as jobs to its training thread). Its ``event`` signal (psygnal) emits
``(kind, module, message)`` on that thread.
"""

from __future__ import annotations

import copy
import difflib
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from psygnal import Signal, SignalInstance
from torch import nn

from gradexplorer.core.hooks.actions import Action
from gradexplorer.core.hooks.all_inputs_hook import AllInputsHookHandle, register_all_inputs_hook
from gradexplorer.core.hooks.failures import (
    INPLACE_REASON,
    HookFailure,
    find_hook_failure,
    inplace_view_error,
)
from gradexplorer.core.hooks.hookable import (
    NO_GRAD_INPUTS,
    HookableModule,
    display_name,
    hookable_modules,
    inplace_problem,
    mixing_problem,
    never_fires,
)
from gradexplorer.core.hooks.parse import parse_action
from gradexplorer.core.hooks.probe import ModuleProbe, probe_modules
from gradexplorer.core.hooks.user_hook import UserHook
from gradexplorer.core.messages.errors import UserError, emit_guarded, first_line

EVENT_KINDS = ("attached", "detached", "failed", "note")
MAX_EVENTS = 1000
# PyTorch warns each time a hook fires on a module whose inputs need no grad; we explain it once.
OUTPUT_FIRING_WARNING = "Full backward hook is firing when gradients are computed with respect"
_QUIET: dict[str, Any] = {"entry": None, "holders": weakref.WeakSet()}


def quiet_output_firing(hook: AttachedHook, on: bool) -> bool:
    """``hook`` holds (``on``) or releases PyTorch's output-firing warning filter: installed
    while some live hook holds it, removed with the last one, so nothing is left in
    ``warnings.filters`` once no such hook is attached (other filters untouched). Returns ``on``."""
    holders = _QUIET["holders"]
    if on:
        holders.add(hook)
        if _QUIET["entry"] is None or _QUIET["entry"] not in warnings.filters:
            before = list(warnings.filters)  # (a catch_warnings block may have dropped ours)
            warnings.filterwarnings("ignore", message=OUTPUT_FIRING_WARNING)
            entry = warnings.filters[0]
            _QUIET["entry"] = None if entry in before else entry  # the process's own stays
        return on
    holders.discard(hook)
    entry = _QUIET["entry"]
    if not holders and entry is not None:
        if entry in warnings.filters:
            warnings.filters.remove(entry)
            getattr(warnings, "_filters_mutated", lambda: None)()
        _QUIET["entry"] = None
    return on


@dataclass(eq=False)
class AttachedHook:
    """One full backward hook the registry holds: where, what, how often it ran."""

    module: str
    action: str
    calls: int = 0
    impl: Action | None = field(default=None, repr=False)
    handle: AllInputsHookHandle | None = field(default=None, repr=False)
    notes: list[str] = field(default_factory=list, repr=False)
    quiet: bool = field(default=False, repr=False)  # holds the output-firing warnings filter

    @property
    def last_stats(self) -> dict[str, Any]:
        """Statistics of the latest call as plain numbers ({} before the first call)."""
        return self.impl.stats() if self.calls and self.impl is not None else {}

    def describe(self) -> dict[str, Any]:
        """``{"module", "action", "calls"}`` for manifests and listings."""
        return {"module": self.module, "action": self.action, "calls": self.calls}


class HookRegistry:
    """Full backward hooks on a model's modules, addressed by dotted path ("" is the root).

    ``event(kind, module, message)``: each attach, detach, failure or note, as it happens
    (``kind`` one of EVENT_KINDS; psygnal holds bound methods and callable objects weakly)."""

    event = Signal(str, str, str)

    def __deepcopy__(self, memo: dict) -> HookRegistry:
        """A copy of a hooked model (``copy.deepcopy(model)``: an EMA twin) copies these hooks
        with it; the copy's registry tells its events to no one (not the original's listeners)."""
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        new.__dict__.update({k: copy.deepcopy(v, memo) for k, v in self.__dict__.items()
                             if not isinstance(v, SignalInstance)})  # a new one when asked for
        return new

    def __init__(self, model: nn.Module, seed: int = 0, sample_inputs: tuple | None = None) -> None:
        self.model = model
        self.seed = seed
        self.sample_inputs = sample_inputs
        self.events: list[str] = []
        self._hooks: dict[str, AttachedHook] = {}
        self._original_flags: dict[str, bool | None] = {}
        self._probes: dict[str, ModuleProbe] | None = None
        self._sessions: list[Any] = []
        self._step_hooks: list[dict[str, Any]] = []
        self._step_start: dict[str, tuple[int, Any]] = {}  # per hook, as the step began

    # -- looking things up -------------------------------------------------------
    def module(self, path: str) -> nn.Module:
        """The module at ``path``; a UserError that suggests names when there is none."""
        path = normalize_path(path)
        names = dict(self.model.named_modules())
        if path in names:
            return names[path]
        close = difflib.get_close_matches(path, [n for n in names if n], n=4)
        hint = f"; did you mean {', '.join(close)}?" if close else " (see gradexplorer hooks)"
        raise UserError(f"the model has no module {path!r}{hint}")

    def attached(self) -> dict[str, AttachedHook]:
        """The hooks attached now, by module path."""
        return dict(self._hooks)

    def hookable(self) -> list[HookableModule]:
        """``hookable_modules`` of this model, probed with the sample inputs when known."""
        return hookable_modules(self.model, self.sample_inputs)

    def describe(self) -> list[dict[str, Any]]:
        """``[{"module", "action", "calls"}]`` for the snapshot manifest."""
        return [hook.describe() for hook in self._hooks.values()]

    def step_hooks(self) -> list[dict[str, Any]]:
        """``describe()`` as it was during the latest backward pass: the hooks that shaped the
        gradients the session holds now, ``once:`` hooks that acted and left included."""
        return [dict(entry) for entry in self._step_hooks]

    def captured_tensors(self) -> dict[str, torch.Tensor]:
        """Tensors kept by ``observe:capture``: ``hooks/<module>/grad_input.0`` → CPU tensor."""
        out = {}
        for path, hook in self._hooks.items():
            if hook.impl is not None:
                for key, tensor in hook.impl.captured().items():
                    out[f"hooks/{display_name(path)}/{key}"] = tensor.cpu()
        return out

    # -- attaching and detaching -------------------------------------------------
    def attach(self, module_path: str, action: str | Callable[..., Any]) -> AttachedHook:
        """Attach ``action`` to a module, replacing a hook already there: text (e.g.
        "scale:0.5", see ``parse_action``) or a function ``fn(module, grad_input, grad_output)``
        returning None or a new grad_input (checked as ``file:`` hooks are)."""
        self.prune()
        path = normalize_path(module_path)
        module = self.module(path)
        impl = parse_action(action, path, self.seed) if isinstance(action, str) \
            else UserHook.of_callable(action, path)
        problem = mixing_problem(module) or self._probe_refusal(path, impl)
        if problem:
            raise UserError(f"cannot hook '{display_name(path)}' with {impl.spec}: {problem}")
        old = self._hooks.get(path)
        if old is not None:
            self._remove(old, "detached", f"{self._label(old)} replaced")
        hook = AttachedHook(path, impl.spec, impl=impl)
        hook.handle = register_all_inputs_hook(module, self._make_hook(hook))
        # as register_full_backward_hook does: PyTorch then refuses an old-style hook here
        self._original_flags[path] = module._is_full_backward_hook
        module._is_full_backward_hook = True
        self._hooks[path] = hook
        self._step_start[path] = (hook.calls, impl.checkpoint())
        self._emit("attached", path, f"{self._label(hook)} attached")
        probe = self._probe(path)
        if probe is not None and not probe.inputs_need_grad:
            hook.quiet = quiet_output_firing(hook, True)  # until it is detached
            self._emit("note", path, f"{self._label(hook)}: {NO_GRAD_INPUTS}")
        return hook

    def detach(self, module_path: str) -> AttachedHook | None:
        """Remove the hook on ``module_path``; None if there was none."""
        hook = self._hooks.get(normalize_path(module_path))
        if hook is not None:
            self._remove(hook, "detached", f"{self._label(hook)} detached")
        return hook

    def detach_all(self) -> None:
        """Remove every hook this registry attached."""
        for hook in list(self._hooks.values()):
            self._remove(hook, "detached", f"{self._label(hook)} detached")

    def prune(self) -> None:
        """Report notes from hook calls and drop ``once:`` hooks that have acted."""
        for hook in list(self._hooks.values()):
            for note in hook.notes:
                self._emit("note", hook.module, f"{self._label(hook)}: {note}")
            hook.notes.clear()
            if hook.impl is not None and hook.impl.spent:
                self._remove(hook, "detached", f"{self._label(hook)} acted once and detached")

    # -- working with a training session -----------------------------------------
    def install(self, session, observe: bool = True) -> None:
        """Recover from hook errors in ``session``'s steps and report hooks in each result
        (``observe=False``: not as an observer of its own; a ``SessionStack`` runs its phases)."""
        if session.model is not self.model:
            raise ValueError("HookRegistry.install: the session trains a different model")
        if session in self._sessions:
            return
        if self.sample_inputs is None:
            self.sample_inputs = session.batch(session.step_count)[0]
        session.backward_error_handlers.append(self.handle_backward_error)
        if observe:
            session.add_observer(self)
        self._mark_step_start()
        self._sessions.append(session)

    def uninstall(self, session) -> None:
        """Undo ``install`` (hooks stay attached; use ``detach_all`` for those)."""
        if session in self._sessions:
            session.backward_error_handlers.remove(self.handle_backward_error)
            session.remove_observer(self)
            self._sessions.remove(session)

    def after_backward(self, session, step: int) -> None:
        """Session observer: runs between backward and optimizer step."""
        self.end_backward()

    def end_backward(self) -> None:
        """The gradients are complete: note the hooks that shaped them (``step_hooks``), then
        drop ``once:`` hooks that acted."""
        self._step_hooks = self.describe()
        self.prune()

    def after_step(self, session, result) -> None:
        """Session observer: ``result.hooks`` lists the hooks and their call counts."""
        if self._step_hooks:
            result.hooks = self.step_hooks()
        self._mark_step_start()

    def handle_backward_error(self, session, exc: BaseException) -> bool:
        """Detach the hook behind ``exc`` and report why; True means the step can be redone.

        The hooks that stay are rolled back to the start of the step (call counts, ``once:``
        spent flags, noise generators), so the redone step is the one they would have made.
        """
        failure = find_hook_failure(exc)
        if failure is not None and failure.module in self._hooks:
            hook = self._hooks[failure.module]
            self._remove(hook, "failed", f"{self._label(hook)} detached: {failure.detail}")
            self._rollback_to_step_start()
            return True
        pytorch_says = inplace_view_error(exc)
        if pytorch_says and self._hooks:
            for hook, reason in self._inplace_culprits(session.batch(session.step_count)[0]):
                message = f"{self._label(hook)} detached: {reason} (PyTorch: {pytorch_says})"
                self._remove(hook, "failed", message)
            self._rollback_to_step_start()
            return True
        return False

    def detach_inplace(self, inputs: tuple | dict) -> list[str]:
        """Probe a forward on ``inputs`` (quietly, leaving no trace) and detach, before PyTorch
        raises, each hook an in-place op sits beside (``forward_guard``: loops not ours); the
        messages of those detached."""
        messages = []
        for hook, reason in self._inplace_culprits(inputs, quiet=True):
            messages.append(f"{self._label(hook)} detached: {reason}")
            self._remove(hook, "failed", messages[-1])
        return messages

    def _mark_step_start(self) -> None:
        self._step_start = {path: (hook.calls, hook.impl.checkpoint() if hook.impl else None)
                            for path, hook in self._hooks.items()}

    def _rollback_to_step_start(self) -> None:
        for path, hook in self._hooks.items():
            if path in self._step_start and hook.impl is not None:
                hook.calls, state = self._step_start[path]
                hook.impl.rollback(state)

    # -- internals -----------------------------------------------------------------
    def _make_hook(self, hook: AttachedHook):
        impl, path = hook.impl, hook.module

        def full_backward_hook(module, grad_input, grad_output):
            if impl.spent:
                return None
            hook.calls += 1
            if impl.modifies and not hook.notes and all(g is None for g in grad_input):
                hook.notes.append(NO_GRAD_INPUTS)
            try:
                return impl(module, grad_input, grad_output)
            except HookFailure:
                raise
            except Exception as exc:  # noqa: BLE001 - report any failure of an action
                detail = f"it failed: {first_line(exc)}"
                raise HookFailure(path, f"{self._label(hook)}: {detail}", detail) from exc

        return full_backward_hook

    def _remove(self, hook: AttachedHook, kind: str, message: str) -> None:
        if hook.handle is not None:
            hook.handle.remove()
        if hook.quiet:
            hook.quiet = quiet_output_firing(hook, False)
        module = self.model.get_submodule(hook.module)
        original = self._original_flags.pop(hook.module, None)
        if not module._backward_hooks:
            module._is_full_backward_hook = original
        self._hooks.pop(hook.module, None)
        self._step_start.pop(hook.module, None)
        self._emit(kind, hook.module, message)

    def _probe(self, path: str) -> ModuleProbe | None:
        if self._probes is None and self.sample_inputs is not None:
            try:
                self._probes = probe_modules(self.model, self.sample_inputs)
            except Exception:  # noqa: BLE001 - the step itself will report a broken model
                self._probes = {}
        return (self._probes or {}).get(path)

    def _probe_refusal(self, path: str, impl: Action) -> str | None:
        probe = self._probe(path)
        if probe is None:
            return None
        problem = never_fires(probe)
        if problem is None and impl.modifies and not probe.inputs_need_grad:
            problem = NO_GRAD_INPUTS
        return problem

    def _inplace_culprits(self, inputs: tuple | dict,
                          quiet: bool = False) -> list[tuple[AttachedHook, str]]:
        """The hooks an in-place op sits beside; all of them when PyTorch raised (not
        ``quiet``) and the probe names none."""
        try:
            self._probes = probe_modules(self.model, inputs, quiet)
        except Exception:  # noqa: BLE001
            self._probes = {}
        found = []
        for path, hook in self._hooks.items():
            module = self.model.get_submodule(path)
            problem = inplace_problem(module, self._probes.get(path))
            if problem:
                found.append((hook, problem))
        if found or quiet:
            return found
        reason = f"{INPLACE_REASON}; it is unclear which hook is affected, so all were detached"
        return [(hook, reason) for hook in self._hooks.values()]

    def _label(self, hook: AttachedHook) -> str:
        return f"hook {hook.action} on '{display_name(hook.module)}'"

    def _emit(self, kind: str, module: str, message: str) -> None:
        self.events.append(message)
        if len(self.events) > MAX_EVENTS:
            del self.events[: len(self.events) - MAX_EVENTS]
        emit_guarded(self.event, "a subscriber of the hook events", kind, module, message)


def normalize_path(path: str) -> str:
    """Dotted module path, with ``<root>`` (or blank) meaning the root module."""
    path = path.strip()
    return "" if path in ("<root>", ".") else path
