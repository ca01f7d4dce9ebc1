"""The one exception type that carries a user-facing, one-line message, and ``measured``: the
guard that turns a failed measurement into one warning."""

import warnings


class UserError(Exception):
    """A problem the user can fix; ``str(err)`` is a single clear line."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


def first_line(exc: BaseException) -> str:
    """The exception's type and the first line of its message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__



def measured(what: str, work, warned: set | None = None, at: str = ""):
    """``(work(), None)``; where it raises, ``(None, cause)`` and one ``RuntimeWarning`` naming
    ``what`` (``at``: where, e.g. " at step 3", said but not part of what makes it the same
    warning) and the cause: a monitor never breaks the loop it watches. With ``warned`` (a set
    the caller keeps) the same ``what`` and cause warn once, however many steps repeat them."""
    try:
        return work(), None
    except Exception as exc:  # noqa: BLE001 - any failure of a measurement: training goes on
        cause = first_line(exc)
        warn_not_recorded(what, cause, warned, at)
        return None, cause


def warn_not_recorded(what: str, cause: str, warned: set | None = None, at: str = "") -> None:
    """The one warning of ``measured`` (once per ``what`` and cause with ``warned``)."""
    if warned is not None:
        if (what, cause) in warned:
            return
        warned.add((what, cause))
    warnings.warn(f"gradexplorer: could not measure {what}{at} ({cause}); not recorded, "
                  "training goes on", RuntimeWarning, stacklevel=4)
