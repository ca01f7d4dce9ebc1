"""Update-to-weight ratio ‖Δθ‖/‖θ‖ across ``optimizer.step()`` on the CPU, measured.

The weights are copied before the step and both norms are read after it, in float64 from the
values the parameters really hold: a bf16/fp16 update that rounds away reports exactly 0, never
the size the optimizer meant (``lr·|g|``). The copies are kept buffers (no allocation per step),
filled in place by address (``numba.in_place.UpdateCopies``).
"""

from __future__ import annotations

import numpy as np
import torch

from gradexplorer.core.stats.backends.numba.in_place import UpdateCopies


class UpdateTracker:
    """``before(params)`` ahead of the step, ``after(params)`` → (P, 2): ‖Δθ‖ and ‖θ_before‖."""

    def __init__(self) -> None:
        self.copies = UpdateCopies()

    def before(self, params: list[torch.Tensor], optimizer=None) -> None:
        """Copy the weights as they are before the optimizer step."""
        self.copies.take(params)

    def after(self, params: list[torch.Tensor], optimizer=None, helper=None) -> np.ndarray:
        """``(P, 2)``: ‖θ_now − θ_before‖ and ‖θ_before‖ per parameter (float64); ``helper``:
        the statistics worker's (``UpdateCopies.update_norms``), which may take half."""
        return self.copies.update_norms(params, helper)
