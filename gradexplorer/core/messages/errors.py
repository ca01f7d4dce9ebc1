"""The one exception type that carries a user-facing, one-line message; ``measured``: the
guard that turns a failed measurement into one warning; ``emit_guarded``: the same for a
signal's subscribers."""

import warnings

from gradexplorer.core.messages.failures import MonitorWarning


class UserError(Exception):
    """A problem the user can fix; ``str(err)`` is a single clear line."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


def first_line(exc: BaseException) -> str:
    """The exception's type and the first line of its message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__



def emit_guarded(signal, what: str, *args) -> None:
    """``signal.emit(*args)`` (a psygnal signal instance); a subscriber that raises becomes a
    ``MonitorWarning`` naming ``what`` and its cause, and the emitting code (a step of the
    training being observed) goes on: a monitor never breaks the loop it watches. Nothing is
    done without a subscriber (an emit to none costs ~10 µs a step)."""
    if not len(signal):
        return
    try:
        signal.emit(*args)
    except Exception as exc:  # noqa: BLE001 - psygnal wraps the subscriber's error (__cause__)
        warnings.warn(f"gradexplorer: {what} failed ({first_line(exc.__cause__ or exc)}); "
                      "training goes on", MonitorWarning, stacklevel=3)


def measured(what: str, work, warned: set | None = None, at: str = ""):
    """``(work(), None)``; where it raises, ``(None, cause)`` and one ``MonitorWarning`` naming
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
                  "training goes on", MonitorWarning, stacklevel=4)


_RENAMED_WARNED: set[tuple[str, str]] = set()  # (where, old name) already warned about


def renamed(where: str, old: str, new: str, old_value, new_value, default):
    """The value of parameter ``new`` of ``where`` given under its old name ``old`` as well.

    ``old_value`` None: ``new_value``. Else one ``FutureWarning`` per process for each
    (``where``, ``old``) (FutureWarning: users see it, unlike DeprecationWarning) and
    ``old_value``; a ``UserError`` when ``new`` was given too (``new_value != default``)."""
    if old_value is None:
        return new_value
    if new_value != default:
        raise UserError(f"{where}: give {new} only ({old} is its old name)")
    if (where, old) not in _RENAMED_WARNED:
        _RENAMED_WARNED.add((where, old))
        warnings.warn(f"{where}: {old} is now called {new}; the old name will go in a later "
                      "release", FutureWarning, stacklevel=3)
    return old_value
