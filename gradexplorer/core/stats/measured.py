"""What is measured of a tensor: dense and real.

A complex tensor is measured as its real and imaginary parts (``torch.view_as_real``: a float
view with a last dimension of 2, no copy), so ‖z‖² = Σ re² + im², and a sparse one as its dense
form. Every figure of a complex parameter (statistics, histograms, norms, the ledger, the
optimizer's state) reads it this way: torch's optimizers update a complex parameter as the same
real view, so the two agree element for element.
"""

from __future__ import annotations

import torch


def measured_tensor(t: torch.Tensor) -> torch.Tensor:
    """``t`` dense and real: a complex one as its parts (a view), detached."""
    t = t.to_dense() if t.is_sparse else t
    return torch.view_as_real(t.detach()) if t.is_complex() else t


def measured_tensors(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """``measured_tensor`` of each; the list itself when all are dense and real (no call each)."""
    if [t for t in tensors if t.is_sparse or t.dtype.is_complex]:
        return [measured_tensor(t) for t in tensors]
    return tensors
