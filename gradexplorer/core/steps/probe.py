"""``AccumulationProbe``: the gradient *as accumulated*, at the end of every backward, and when
it may take the applied point's norms instead of measuring them again.

A post-accumulate-grad hook on each parameter queues one callback of the autograd engine per
backward, which runs once the whole backward is done (and re-queues itself once, so it runs
after the callbacks others queued meanwhile, such as DDP's gradient reduction). With the model
given, a forward hook also puts a pre-hook on its outputs' autograd nodes: that one fires first
in every backward through the model, inside the outermost backward, so the callback is queued
there (a reentrant backward nested in another, ``checkpoint(..., use_reentrant=True)``, would
otherwise end first and count as a backward of its own).

**Reuse, when proven.** Most loops leave ``.grad`` alone between the last backward and the step
(no scaler, no clipping): then the gradient as accumulated *is* the gradient as applied, and
measuring it twice only costs time. At the end of each backward the probe keeps every gradient
tensor and the sum of their version counters (autograd raises a tensor's counter on every
in-place write: clipping, unscaling, another backward's accumulation; a new tensor changes the
identity); at the step it compares them. A loop is trusted once ``PROOF_STEPS`` recorded steps
in a row had the same tensors at both points *and* equal norms measured at both (a write that
bypasses the version counter, such as ``p.grad.data.clamp_(...)``, shows there as unequal norms
and keeps the probe measuring every step). From then on a recorded step whose gradients are
provably the tensors backward left takes the applied point's norms (``reuse``): the same
figures, not measured twice. Every ``VERIFY_EVERY``-th recorded step is measured at both points
again. A step whose gradients changed although the loop was trusted has no accumulated figure
(no norms: the ledger leaves it empty, never a wrong one) and the probe measures every step
until the loop is proven anew.

**One hook, when proven.** While every backward of the proof began at the model's output and
reached the same parameter first, in the same backward (its *anchor*: usually the last
layer's bias), a trusted probe keeps only the anchor's hook: one Python call per backward
instead of one per parameter and a hook per forward. Any doubt puts every hook back: a step
without a backward that reached the anchor is treated as a changed gradient, as above. A backward
that reaches parameters but not the anchor, made only after the proof, is then not counted in
``micro_batches`` (the gradient figures stay exact: it shows as a change, or came before the
anchor's backward, whose end the figures describe).
"""

from __future__ import annotations

from functools import partial
from itertools import compress, repeat
from operator import attrgetter, is_, is_not

import numpy as np
import torch
from torch import nn
from torch.autograd import Variable

from gradexplorer.core.steps.accumulated import AccumulatedNorms, grad_norms

PROOF_STEPS = 3  # recorded steps measured at both points, found equal, before reuse
VERIFY_EVERY = 50  # while reusing, every 50th recorded step is measured at both points
SAME_RTOL = 1e-12  # the two points' norms agree to this (two kernels, the same gradient)

_GRAD, _VERSION = attrgetter("grad"), attrgetter("_version")
_task = getattr(torch._C, "_current_graph_task_id", None)  # the backward under way (torch ≥ 2.1)


def _versions(grads: list) -> int:
    """The sum of the gradients' version counters, None skipped (where every parameter has a
    gradient, the callers' ``sum(map(_VERSION, grads))`` is one pass less)."""
    return sum(map(_VERSION, compress(grads, map(is_not, grads, repeat(None)))))


def _grad_tensors(output, limit: int = 8) -> list[torch.Tensor]:
    """Up to ``limit`` tensors needing a gradient in a model's output (tensors, sequences,
    mappings such as a transformers ModelOutput)."""
    found, todo = [], [output]
    while todo and len(found) < limit:
        item = todo.pop()
        if isinstance(item, torch.Tensor):
            if item.requires_grad:
                found.append(item)
        elif isinstance(item, dict):
            todo.extend(item.values())
        elif isinstance(item, (list, tuple)):
            todo.extend(item)
    return found


class AccumulationProbe:
    """Counts backwards and keeps the norms of ``.grad`` at the end of the latest one.

    ``wanted()`` says whether the next step is recorded (norms are taken only then; backwards
    are always counted). ``take()`` at the step: the norms of the last backward, the gradient
    as the step finds it when no backward was seen since the previous step, or (once the loop
    is proven, see the module's docstring) ``reuse``: the applied point's norms are these.
    """

    def __init__(self, named: list[tuple[str, nn.Parameter]], wanted=None,
                 model: nn.Module | None = None, report=None, reuse: bool = True) -> None:
        self.named = [(n, p) for n, p in named]
        self._params = [p for _, p in self.named]
        self._every = (True,) * len(self._params)  # ``present`` when every one has a gradient
        self.wanted = wanted  # None: every step
        self.backwards = 0  # every backward that reached a parameter, since the probe began
        self.since_step = 0  # backwards since the last step (the step's micro-batches)
        self._latest: AccumulatedNorms | None = None
        self._queued = False
        self._kept: tuple[list, int] | None = None  # (gradients, sum of versions) after backward
        self.trusted = False  # the loop leaves .grad alone between backward and step
        self._proven = 0  # recorded steps in a row found the same at both points
        self._recorded = 0  # recorded steps since the loop was trusted
        self._model = model
        self._output_task = None  # the backward the model's output hook began (its graph task)
        self._first = None  # the first parameter reached in this backward
        self.anchor: nn.Parameter | None = None  # while every backward reached it first
        self._anchor_ok = model is not None and _task is not None
        self.hooks = "none"  # "all": every parameter's and the output's; "anchor": one
        self._report = report  # said once: a trusted loop's step whose point was lost
        self._may_reuse = reuse  # False: measured at every recorded step, whatever the loop
        self.lost = 0  # such steps
        self.on_backward = None  # at every backward's end: on_backward(recorded step?)
        self._handles: list = []
        queue = Variable._execution_engine.queue_callback  # bound once: called every backward
        self._queue = queue
        # at the end of backward: queue the probe's callback again, behind the callbacks others
        # queued meanwhile (a C-level call, no Python frame)
        self._after_others = partial(queue, self._backward_done)
        self._all_hooks()

    # -- hooks ---------------------------------------------------------------------
    def _unhook(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def _all_hooks(self) -> None:
        if self.hooks == "all":
            return
        self._unhook()
        if self._model is not None:
            self._handles.append(self._model.register_forward_hook(self._on_output))
        self._handles += [p.register_post_accumulate_grad_hook(self._on_grad)
                          for p in self._params if p.requires_grad]
        self.hooks = "all"

    def _anchor_hook(self) -> None:
        if self.hooks == "anchor" or not self._anchor_ok or self.anchor is None:
            return
        self._unhook()
        self._handles = [self.anchor.register_post_accumulate_grad_hook(self._on_anchor)]
        self.hooks = "anchor"

    def _on_output(self, _module, _args, output) -> None:
        if torch.is_grad_enabled():
            for tensor in ((output,) if type(output) is torch.Tensor else _grad_tensors(output)):
                if not tensor.requires_grad:
                    continue
                node = tensor.grad_fn  # a pre-hook on its node: half the cost of a tensor hook
                if node is None:
                    tensor.register_hook(self._on_output_grad)
                else:
                    node.register_prehook(self._on_output_grad)

    def _on_output_grad(self, *_grads) -> None:
        if not self._queued:
            self._output_task = _task() if _task is not None else None
            self._on_grad(None)

    def _on_grad(self, param) -> None:
        if self._first is None and param is not None:
            same = self._output_task is not None and _task() == self._output_task
            self._first = param if same else False  # False: not in the output's backward
        if not self._queued:
            self._queued = True
            self._queue(self._after_others)

    def _on_anchor(self, _param) -> None:
        """The one hook of a trusted probe (no first parameter to find: the anchor is known)."""
        if not self._queued:
            self._queued = True
            self._queue(self._after_others)

    def _backward_done(self) -> None:
        self._queued = False
        self.backwards += 1
        self.since_step += 1
        try:
            if self.hooks == "all":  # the anchor: the same first parameter in every backward
                first, self._first, self._output_task = self._first, None, None
                if first is None or first is False or \
                        (self.anchor is not None and first is not self.anchor):
                    self._anchor_ok = False
                self.anchor = first if self._anchor_ok else None
            recorded = self.wanted is None or self.wanted()
            if self.on_backward is not None:  # the noise scale's capture (micro_batches.py)
                self.on_backward(recorded)
            if not recorded:
                self._latest = self._kept = None
                return
            grads = list(map(_GRAD, self._params))  # (C-level loops: this runs every step)
            try:
                versions = sum(map(_VERSION, grads))  # every parameter has a gradient
            except AttributeError:  # a parameter without a gradient
                versions = _versions(grads)
            self._kept = (grads, versions)
            # the step under way takes the applied norms: a trusted loop, not a check step
            reusing = self.trusted and (self._recorded + 1) % VERIFY_EVERY != 0
            self._latest = None if reusing else self._measured(grads)
        except Exception:  # noqa: BLE001 - a monitor never breaks the backward it watches
            self._latest = self._kept = None

    # -- the two points ------------------------------------------------------------
    def _measured(self, grads: list, at_step: bool = False) -> AccumulatedNorms:
        norms = grad_norms([g for g in grads if g is not None])
        return AccumulatedNorms([g is not None for g in grads], norms, at_step)

    def measure(self, at_step: bool = False) -> AccumulatedNorms:
        """The norms of the gradients the parameters hold now."""
        return self._measured([p.grad for p in self._params], at_step)

    def _unchanged(self, grads: list, versions: int) -> bool:
        """The gradients (their version sum given) are the tensors the last backward left,
        not written since."""
        if self._kept is None:
            return False
        kept, then = self._kept  # the same tensors: a write to any raises its version,
        return all(map(is_, grads, kept)) and versions == then  # and so their sum

    def take(self) -> AccumulatedNorms:
        """At a recorded step: its accumulated norms (or ``reuse``); starts the next step."""
        latest, kept_ok = self._latest if self.since_step else None, False
        grads = list(map(_GRAD, self._params))
        try:
            versions, present = sum(map(_VERSION, grads)), self._every  # no None: every one
        except AttributeError:  # a parameter without a gradient
            versions, present = _versions(grads), list(map(is_not, grads, repeat(None)))
        if self._queued and self._unfinished():  # a backward raised: the backwards after it
            out = AccumulatedNorms(present, None)  # went unseen; no norms: not known
            self._lose("a backward raised before its end, so the backwards after it were not seen")
        elif self.since_step and self.trusted and latest is None:  # reusing: only if nothing
            kept, then = self._kept or (None, None)  # wrote .grad since the backward
            kept_ok = kept is not None and all(map(is_, grads, kept)) and versions == then
            out = AccumulatedNorms(present, None, reuse=kept_ok)  # else no norms: not known
            if not kept_ok:
                self._lose(".grad was written between the last backward and the step")
        elif not self.since_step and self.hooks == "anchor":  # a backward may have missed it
            out = AccumulatedNorms(present, None)  # no norms: not known
            self._lose("no backward reached the parameter watched")
        elif not self.since_step:  # no backward seen: the gradient as the step finds it, which
            out = AccumulatedNorms(present, None, at_step=True, reuse=True)  # is the applied one
        else:
            out = latest if latest is not None else self._measured(grads, at_step=True)
            kept_ok = latest is not None and self._unchanged(grads, versions)
            if kept_ok:
                out.check = lambda applied, mine=out: self._confirm(applied, mine.host())
            else:
                self._distrust()
        if self.trusted:
            self._recorded += 1
            if (self._recorded + 1) % VERIFY_EVERY == 0:  # the next step is a check step:
                self._all_hooks()  # every hook watches it
        self._latest, self._kept, self.since_step = None, None, 0
        return out

    def _confirm(self, applied: np.ndarray | None, measured: np.ndarray) -> bool:
        """The applied point's norms of a step measured at both points with unchanged tensors;
        True where they agree (the same tensors: the step's accumulated norms are the applied
        ones, one kernel's figures for both, so an unclipped step's coefficient is exactly 1)."""
        agree = applied is not None and applied.shape == measured.shape and \
            bool(np.all(np.abs(applied - measured) <= SAME_RTOL * np.abs(measured)))
        if not (agree and self._may_reuse):
            self._distrust()
            return agree
        self._proven += 1
        if self._proven >= PROOF_STEPS and not self.trusted:
            self.trusted, self._recorded = True, 0
        if self.trusted:
            self._anchor_hook()
        return True

    def _unfinished(self) -> bool:
        """The end-of-backward callback was queued by a backward that ended without running it
        (an exception inside it, caught by the loop): outside any backward, nothing will run
        it. Clears the flag, so that the next backward is seen again."""
        if _task is None or _task() != -1:  # inside a backward (or no way to tell)
            return False
        self._queued, self._first, self._output_task = False, None, None
        return True

    def _lose(self, why: str) -> None:
        """This step's accumulated point is not known (a trusted loop changed, or a backward
        raised); say so once."""
        self.lost += 1
        if self.lost == 1 and self._report is not None:
            since = f" after {PROOF_STEPS}+ steps that left .grad alone" if self.trusted else ""
            self._report(f"gradexplorer: {why}{since}: that step's gradient as accumulated is not "
                         "known (its ledger leaves it empty); measured at every step from the "
                         "next one")
        self._distrust()

    def _distrust(self) -> None:
        self.trusted, self._proven = False, 0
        self.anchor, self._anchor_ok = None, self._model is not None and _task is not None
        self._all_hooks()

    def advance(self) -> None:
        """At a step that is not recorded: starts the next step."""
        if self._queued:
            self._unfinished()
        self._latest, self._kept, self.since_step = None, None, 0

    def remove(self) -> None:
        self._unhook()
        self.hooks = "none"
