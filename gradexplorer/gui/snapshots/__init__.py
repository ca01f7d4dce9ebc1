"""Browsing gradient snapshots without the model, alone or two side by side."""
