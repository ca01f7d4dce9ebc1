"""``run``'s spike lines: one line when a spike begins, a count at the end."""

from __future__ import annotations

import sys
from typing import TextIO

from gradexplorer.commands.gradient_options import print_line


class SpikeLines:
    """A SpikeObserver (``observer``: a reporter of the session's stack) whose events it prints."""

    def __init__(self, stream: TextIO | None = None) -> None:
        from gradexplorer.core.diagnose.spike_observer import SpikeObserver  # (numpy)

        self.stream = stream or sys.stdout
        self.observer = SpikeObserver()
        self.observer.spike.connect(self._event)

    def _event(self, event, step: int) -> None:
        from gradexplorer.core.diagnose.spikes import ids_text
        from gradexplorer.core.session.batch_ids import batch_text

        if event.step == step:  # the event begins: say so once, with its batch's identity
            batch = event.batch
            named = batch_text(batch) or ids_text(batch)
            print_line(f"  ! spike at {event.summary()}; batch {named}", self.stream)

    def summary(self) -> list[str]:
        events = self.observer.events
        if not events:
            return []
        return [f"spikes: {len(events)} event(s), at step(s) "
                f"{', '.join(str(e.step) for e in events)}"]
