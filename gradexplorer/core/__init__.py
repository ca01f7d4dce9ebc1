"""Headless engine of gradexplorer: models, training steps, gradients, graphs, hooks.

Nothing under ``gradexplorer.core`` imports Qt; the GUI observes these objects.
"""

from gradexplorer.core.errors import UserError
from gradexplorer.core.workload import Workload

__all__ = ["UserError", "Workload"]
