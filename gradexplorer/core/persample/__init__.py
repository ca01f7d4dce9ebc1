"""Per-sample gradient norms without per-sample gradients (docs/per_sample.md)."""
