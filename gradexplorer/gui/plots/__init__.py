"""Live gradient plots: histogram, histogram over time, gradient flow, NaN/Inf alarm."""
