"""What to train: model specs (examples, files, packages), user code, weights and ``Workload``.

``load_workload(spec, ModelOptions(...))`` turns ``example:lenet``, ``path/file.py:build`` or
``package.module:build`` into a ``Workload``: the model, how to make a batch and the loss.
"""
