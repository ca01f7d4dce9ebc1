"""The device backend: one fused torch pass per (device, dtype) group (``grouped``), optionally on
a side CUDA stream."""
