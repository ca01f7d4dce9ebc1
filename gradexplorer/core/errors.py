"""The one exception type that carries a user-facing, one-line message."""


class UserError(Exception):
    """A problem the user can fix; ``str(err)`` is a single clear line."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))
