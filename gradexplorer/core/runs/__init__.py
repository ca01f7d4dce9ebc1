"""A run directory: its schema, the writer, validation of what is read, ``Run`` and the run-wide
reads (``history``), where two runs part (``divergence``) and step comparison."""
