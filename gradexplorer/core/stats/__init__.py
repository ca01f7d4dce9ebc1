"""Exact gradient statistics and histograms per parameter, every step.

``monitor.GradientMonitor`` is the front door: it picks a backend (``backend_cpu`` with the Numba
``kernels``, or ``backend_torch`` on devices), returns ``records.StepGradients`` and keeps a
bounded ``history``. ``histogram`` holds the bin maths shared by every backend and view.
"""
