"""The colours runs and heat maps are drawn in, the same in the app and in the report: the
runs' palette (the first run blue, the second red …) and the viridis map of the heat maps."""

from __future__ import annotations

import numpy as np

# one colour per run, in the order runs are added (the app's overlay, the report's curves)
RUN_COLOURS = ("#1e88e5", "#e53935", "#43a047", "#fb8c00", "#8e24aa", "#00acc1", "#6d4c41", "#d81b60")

# viridis at 9 stops (matplotlib's), interpolated to 256 entries (RGB, uint8)
VIRIDIS_STOPS = np.array([[68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141],
                          [39, 173, 129], [92, 200, 99], [170, 220, 50], [253, 231, 37]], dtype=np.float64)
VIRIDIS = np.stack([np.interp(np.linspace(0, 8, 256), np.arange(9), VIRIDIS_STOPS[:, c]) for c in range(3)],
                   axis=1).round().astype(np.uint8)
