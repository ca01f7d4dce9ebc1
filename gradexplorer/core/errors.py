"""The one exception type that carries a user-facing, one-line message."""


class UserError(Exception):
    """A problem the user can fix; ``str(err)`` is a single clear line."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


def first_line(exc: BaseException) -> str:
    """The exception's type and the first line of its message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
