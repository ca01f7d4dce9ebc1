"""Diagnosis on the backward graph: gradients on every op, where NaN/Inf is born, what ops compute."""
