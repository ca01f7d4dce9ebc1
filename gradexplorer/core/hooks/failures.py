"""Recognising the ways a full backward hook breaks a step, and saying why in one line."""

from __future__ import annotations

from collections.abc import Iterator

from gradexplorer.core.messages.errors import UserError

INPLACE_MARKERS = ("BackwardHookFunction", "inplace")


class HookFailure(UserError):
    """A hook failed during backward: ``module`` is where it was attached, ``detail`` what went
    wrong (the message without the hook's name)."""

    def __init__(self, module: str, message: str, detail: str | None = None) -> None:
        super().__init__(message)
        self.module = module
        self.detail = " ".join((detail or message).split())


def exception_chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from or while handling, innermost last."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def find_hook_failure(exc: BaseException) -> HookFailure | None:
    """The HookFailure behind ``exc``, if any."""
    return next((e for e in exception_chain(exc) if isinstance(e, HookFailure)), None)


def inplace_view_error(exc: BaseException) -> str | None:
    """The first sentence of PyTorch's "Output 0 of BackwardHookFunction is a view and is being
    modified inplace" error behind ``exc`` (full backward hooks next to in-place ops), or None."""
    for e in exception_chain(exc):
        text = str(e)
        if all(m in text for m in INPLACE_MARKERS):
            start = text.find("Output ")
            return text[max(start, 0):].split(". ")[0].strip()
    return None


INPLACE_REASON = (
    "an in-place operation (such as ReLU(inplace=True) or +=) modifies a tensor that a full "
    "backward hook wraps, which PyTorch forbids"
)
