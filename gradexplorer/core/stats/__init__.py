"""What the gradient figures are: exact statistics and histograms per parameter, every step.

``monitor.GradientMonitor`` is the front door: it takes a backend from ``backends.registry``
(Numba kernels on the CPU: ``backends/numba``; fused torch ops or Triton elsewhere:
``backends/torch``, ``backends/triton``), returns ``records.StepGradients`` and keeps a bounded
``history``. ``backends.raw`` says how the moments are kept exact (scaled, midrange-shifted
sums); ``histogram`` holds the bin maths shared by every backend and view. ``STAT_FIELDS``: the
figures kept of each gradient (here, so the command line lists them before numpy is imported).
"""

STAT_FIELDS = ("norm", "mean", "std", "min", "max", "abs_max", "zero_fraction",
               "nan_count", "inf_count", "update_ratio")
