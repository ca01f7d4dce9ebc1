"""Which run directory the window shows instead of its model, and what follows it (Qt-free).

The window owns one ``ShownRun``; ``gui/runs/run_view.py`` changes it through its methods.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class ShownRun:
    """The run folder shown (``path``, None while the window shows its model), the
    ``RunFollower`` reading it as it grows, or the ``RunWaiter`` looking for it until its writer
    has created it (anything with ``close()`` / ``stop()``)."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self.follower: Any = None
        self.waiter: Any = None

    @property
    def showing(self) -> bool:
        """Whether a run is shown instead of the model."""
        return self.path is not None

    def enter(self, path: Path) -> None:
        """A run is shown from now on (waited for or followed)."""
        self.path = path

    def wait(self, waiter: Any) -> None:
        """The run is looked for by ``waiter`` until it exists."""
        self.waiter = waiter

    def follow(self, follower: Any) -> None:
        """The run exists and ``follower`` reads it (no more waiting)."""
        self.waiter, self.follower = None, follower

    def is_followed_by(self, follower: Any) -> bool:
        """Whether ``follower`` is still the one reading the shown run."""
        return follower is not None and self.follower is follower

    def stop(self) -> None:
        """Stop following or waiting."""
        follower, waiter = self.follower, self.waiter
        self.follower = self.waiter = None
        if waiter is not None:
            waiter.stop()
        if follower is not None:
            follower.close()

    def leave(self) -> bool:
        """The model is shown again (after ``stop``); whether a run was shown."""
        was, self.path = self.path is not None, None
        return was
