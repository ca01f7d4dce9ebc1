"""Module gradient figures equal an independent float64 computation over the real gradients."""

import torch

from gradexplorer import TrainingSession, load_workload
from gradexplorer.core.stats.module_rollup import module_gradients, owners
from gradexplorer.session import GradientMonitor, SessionConfig


def test_module_figures_match_float64_over_their_parameters():
    session = TrainingSession(load_workload("example:lenet"), SessionConfig(device="cpu"))
    monitor = GradientMonitor(bins=16)
    session.add_observer(monitor)
    session.step()
    gradients = session.step().gradients
    rolled = module_gradients(gradients.params)
    grads = {n: p.grad.detach().double() for n, p in session.model.named_parameters()}
    for path in ("", "conv1", "fc2"):
        mine = [g for n, g in grads.items() if not path or n.startswith(path + ".")]
        flat = torch.cat([g.flatten() for g in mine])
        figures = rolled[path]
        assert figures.params == len(mine) == figures.with_grad
        assert abs(figures.norm - flat.norm().item()) <= 1e-12 * flat.norm().item()
        assert abs(figures.abs_max - flat.abs().max().item()) <= 1e-6 * figures.abs_max
        ratios = [gradients.params[n].update_ratio for n in grads if not path or n.startswith(path + ".")]
        assert figures.update_ratio == max(ratios) and figures.nonfinite == 0
    assert set(rolled) == {"", "conv1", "conv2", "fc1", "fc2", "fc3"}


def test_rollup_counts_nonfinite_and_missing_gradients():
    from gradexplorer.core.stats.records import ParamStats

    params = {"a.b.w": ParamStats("a.b.w", (2,), 2, True, norm=3.0, abs_max=3.0, nan_count=1,
                                  inf_count=2),
              "a.c.w": ParamStats("a.c.w", (2,), 2, True, norm=4.0, abs_max=2.5),
              "a.d.w": ParamStats("a.d.w", (2,), 2, False)}
    rolled = module_gradients(params)
    assert rolled["a"].norm == 5.0 and rolled["a"].abs_max == 3.0 and rolled["a"].nonfinite == 3
    assert (rolled["a"].params, rolled["a"].with_grad) == (3, 2)
    assert rolled["a.d"].norm is None and rolled["a.d"].with_grad == 0
    assert owners("a.b.w") == ["", "a", "a.b"]
