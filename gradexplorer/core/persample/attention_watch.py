"""``AttentionWatch``: the tracker's hooks on one ``nn.MultiheadAttention``.

Its forward pre-hook enters an ``AttentionCalls`` mode (``attention.py``) for the call; its forward
hook (``always_call``: on an exception too) leaves it and names any watched parameter that the
call did not use through ``F.linear``/``repeat`` (then no figure is given for it this pass).
The mode is entered only where the step is measured and gradients are on: then torch's fused
``_native_multi_head_attention`` is never taken anyway (it needs no gradient, or eval mode
without any trainable parameter of the MHA), so the watched call runs the same code as the
unwatched one.
"""

from __future__ import annotations

import torch
from torch import nn

from gradexplorer.core.persample import attention as A


class AttentionWatch:
    """Hooks feeding ``tracker.watch_output`` with the MHA ``module``'s calls."""

    def __init__(self, tracker, name: str, module: nn.MultiheadAttention) -> None:
        self.tracker, self.name, self.module = tracker, name, module
        self.params = [p for p in (*module.parameters(recurse=False),
                                   *module.out_proj.parameters()) if p.requires_grad]
        self._modes: list[tuple[A.AttentionCalls, object] | None] = []
        self.handles = [
            module.register_forward_pre_hook(self._enter, with_kwargs=True),
            module.register_forward_hook(self._leave, with_kwargs=True, always_call=True)]

    def _enter(self, module, args, kwargs) -> None:
        tracker = self.tracker
        n = A.samples_of(module, args, kwargs)
        if not (tracker._active() and torch.is_grad_enabled()) or n is None:
            self._modes.append(None)
            return
        slot = tracker._slot()
        if slot.samples is None:
            slot.samples = n
        if n != slot.samples:
            slot.failed[self.name] = f"its batch ({n}) is not the model's ({slot.samples})"
            self._modes.append(None)
            return

        def found(uses: list[A.Use], x, output) -> None:
            owner = tracker._owner.get(id(uses[0].param), self.name)
            tracker.watch_output(slot, owner, [(id(u.param), 0) for u in uses], output,
                                 lambda g: A.blocks(uses, x, g, n))

        mode = A.AttentionCalls(self.params, found)
        mode.__enter__()
        self._modes.append((mode, slot))

    def _leave(self, module, args, kwargs, output) -> None:
        entry = self._modes.pop() if self._modes else None
        if entry is None:
            return
        mode, slot = entry
        mode.__exit__(None, None, None)
        unused = [n for n, p in (*module.named_parameters(recurse=False),
                                 *module.out_proj.named_parameters(prefix="out_proj"))
                  if p.requires_grad and id(p) not in mode.seen]
        if mode.error is not None or unused:
            why = mode.error or f"{', '.join(unused)} not used through F.linear"
            slot.failed[self.name] = why
            for key in [k for k in slot.pending if k[0] in {id(p) for p in self.params}]:
                slot.pending.pop(key)  # no figure rather than a part of one
