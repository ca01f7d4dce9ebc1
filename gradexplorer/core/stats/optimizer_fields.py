"""The optimizer-state figures by name and their column labels (no torch: the app's table
names its columns before torch is imported; ``optimizer_state`` reads the figures)."""

STATE_FIELDS = ("lr", "exp_avg_norm", "exp_avg_sq_rms", "effective_lr", "momentum_norm")
STATE_LABELS = {"lr": "lr", "exp_avg_norm": "‖m‖", "exp_avg_sq_rms": "RMS √v̂",
                "effective_lr": "eff. lr", "momentum_norm": "‖momentum‖"}
