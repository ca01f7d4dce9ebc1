"""The CPU backend: Numba kernels over gradients copied (``cpu``), read in place (``in_place``) or
on a worker thread (``worker``); the update ratio on the CPU."""
