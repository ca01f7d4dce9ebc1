"""Record the gradients of training the user runs (``gradexplorer.watch``) into a run directory."""
