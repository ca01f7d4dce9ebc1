"""The Triton statistics pass of one (device, dtype) group: two kernels, two reads."""
