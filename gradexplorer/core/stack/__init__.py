"""The one assembly of what observes a training session (``assembly.SessionStack``)."""
