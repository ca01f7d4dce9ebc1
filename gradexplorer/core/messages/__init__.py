"""What the user is told: ``UserError`` (one line), numbers (``number_text``), names and text shown
safely (``printable``)."""
