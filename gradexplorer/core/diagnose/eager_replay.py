"""A replay runs the user's own modules op by op: ``torch.compile`` and checkpointing set aside.

A compiled model's forward is one graph and its backward one ``CompiledFunctionBackward`` node,
so none of its ops can be watched or named; a reentrant-checkpointed block is one
``CheckpointFunctionBackward`` node that ``torch.autograd.grad`` refuses outright. Inside
``eager_replay()`` compiled code runs eagerly (``torch.compiler.set_stance("force_eager")``)
and ``torch.utils.checkpoint.checkpoint`` calls its function directly (reentrant or not: the
same values, every activation kept), so a replay sees and names every op of the user's modules.
The switch is process-wide while it lasts (the replay runs on the training thread, between its
steps). ``user_path`` drops the wrappers' own names from a module path: ``_orig_mod.fc`` is
``fc``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

WRAPPERS = frozenset({"_orig_mod", "_checkpoint_wrapped_module"})


def user_path(path: str) -> str:
    """A module or parameter path without the wrappers' own attribute names."""
    return ".".join(part for part in path.split(".") if part not in WRAPPERS) if path else path


def _direct(function, preserve_rng_state, *args):
    return function(*args)


def _no_recompute(*args, **kwargs):
    yield  # the non-reentrant checkpoint's set-up and tear-down, both left out


@contextmanager
def _checkpoints_direct() -> Iterator[None]:
    import torch.utils.checkpoint as checkpoint

    cls = checkpoint.CheckpointFunction
    own = cls.__dict__.get("apply")
    generator = checkpoint._checkpoint_without_reentrant_generator
    cls.apply = staticmethod(_direct)
    checkpoint._checkpoint_without_reentrant_generator = _no_recompute
    try:
        yield
    finally:
        checkpoint._checkpoint_without_reentrant_generator = generator
        if own is None:
            del cls.apply
        else:
            cls.apply = own


@contextmanager
def eager_replay() -> Iterator[None]:
    """Inside: compiled code runs eagerly, checkpointed functions run directly."""
    with ExitStack() as stack:
        stack.enter_context(_checkpoints_direct())
        if "torch._dynamo" in sys.modules:  # nothing can be compiled before dynamo is imported
            import torch

            stack.enter_context(torch.compiler.set_stance("force_eager"))
        yield
