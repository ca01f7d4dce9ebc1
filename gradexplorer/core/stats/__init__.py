"""Exact gradient statistics and histograms per parameter, every step.

``monitor.GradientMonitor`` is the front door: it picks a backend (``numba.cpu`` with the Numba
``kernels`` on the CPU, or ``torch.grouped`` with the ``fused`` whole-group torch ops elsewhere),
returns ``records.StepGradients`` and keeps a bounded ``history``. ``raw`` says how the moments
are kept exact (scaled, midrange-shifted sums); ``histogram`` holds the bin maths shared by every
backend and view; ``numba.update_ratio`` measures ‖Δθ‖/‖θ‖ on the CPU. ``STAT_FIELDS``: the figures
kept of each gradient (here, so the command line lists them before numpy is imported).
"""

STAT_FIELDS = ("norm", "mean", "std", "min", "max", "abs_max", "zero_fraction",
               "nan_count", "inf_count", "update_ratio")
