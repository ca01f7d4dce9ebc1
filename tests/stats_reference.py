"""Independent float64 references for the gradient statistics tests, and a monitored step."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from gradexplorer.session import GradientMonitor


class Holder(nn.Module):
    """Parameters of given shapes and dtypes whose gradients a test sets by hand."""

    def __init__(self, grads: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.ps = nn.ParameterDict({n: nn.Parameter(torch.zeros_like(g)) for n, g in grads.items()})
        for n, g in grads.items():
            self.ps[n].grad = g.clone()


def reference(x: np.ndarray) -> dict:
    """Figures over the finite elements in float64: exact sums (fsum), scaled where squares
    would overflow, two-pass variance with ddof=0."""
    x = np.asarray(x, dtype=np.float64).ravel()
    f = x[np.isfinite(x)]
    out = {"zero_fraction": float(np.mean(x == 0)) if x.size else 0.0,
           "nan_count": int(np.isnan(x).sum()), "inf_count": int(np.isinf(x).sum())}
    if not f.size:
        return out
    top = float(np.abs(f).max()) or 1.0
    mean = math.fsum(f / top) / f.size * top
    centred = (f - mean) / top
    out.update(norm=top * math.sqrt(math.fsum(np.square(f / top))), mean=mean,
               std=top * math.sqrt(math.fsum(np.square(centred)) / f.size),
               min=float(f.min()), max=float(f.max()), abs_max=float(np.abs(f).max()))
    return out


def assert_matches(stats, hist, grad: torch.Tensor, rel: float = 1e-9) -> None:
    """One parameter's ParamStats (and Histogram, if any) against ``reference``."""
    x = grad.detach().double().numpy().ravel()
    expected = reference(x)
    for field, value in expected.items():
        got = getattr(stats, field)
        # a mean that cancels to ~0 is exact to rounding of the values, not of itself
        floor = 1e-14 * expected["abs_max"] if field == "mean" else 1e-300
        assert math.isclose(got, value, rel_tol=rel, abs_tol=floor), (stats.name, field, got, value)
    if hist is not None:
        finite = x[np.isfinite(x)]
        inside = finite[(finite >= hist.edges[0]) & (finite <= hist.edges[-1])]
        assert np.array_equal(hist.counts, np.histogram(inside, bins=hist.edges)[0]), stats.name
        assert hist.total == x.size


def monitored_step(model, optimizer, monitors: list[GradientMonitor], step: int = 1):
    """One optimizer step on the gradients ``model`` holds, watched by every monitor."""
    named = list(model.named_parameters())
    for m in monitors:
        m.begin(named, optimizer, step)
    with torch.no_grad():
        optimizer.step()
    return [m.finish(optimizer, step) for m in monitors]


def reference_state(opt, p, group):
    """The optimizer-state figures of one parameter, recomputed in float64 with numpy."""
    st = opt.state[p]
    out = {"lr": group["lr"]}
    if "exp_avg" in st:
        m = st["exp_avg"].double().numpy()
        v = st["exp_avg_sq"].double().numpy()
        if group.get("amsgrad"):
            v_max = st["max_exp_avg_sq"].double().numpy()
        else:
            v_max = v
        bc2 = 1 - group["betas"][1] ** float(st["step"])
        out["exp_avg_norm"] = np.sqrt(np.sum(m * m))
        out["exp_avg_sq_rms"] = np.sqrt(np.mean(np.sqrt(v / bc2) ** 2))
        out["effective_lr"] = np.mean(group["lr"] / (np.sqrt(v_max / bc2) + group["eps"]))
    if st.get("momentum_buffer") is not None:
        b = st["momentum_buffer"].double().numpy()
        out["momentum_norm"] = np.sqrt(np.sum(b * b))
    return out
