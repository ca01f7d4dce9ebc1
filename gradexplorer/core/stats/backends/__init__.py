"""How the figures of ``core.stats`` are made, fast: ``registry`` picks a backend (Numba on the
CPU, fused torch ops or Triton elsewhere); ``raw`` is what every backend hands back,
``step_arrays`` turns it into a step's records. The modules of ``core.stats`` import the
backends only through ``registry``."""
