"""Running training: ``TrainingSession`` (a generator of step results), devices, environment.

The session owns the model and optimizer, steps them, and hands each ``StepResult`` (loss,
gradient statistics, hook events) to whoever drives it: the command line, the GUI's worker or a
benchmark.
"""
