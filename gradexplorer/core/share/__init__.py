"""Sharing a run: exports into TensorBoard, wandb, CSV and Parquet, and the HTML report."""
