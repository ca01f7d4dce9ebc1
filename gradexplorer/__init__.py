"""gradexplorer: see and control PyTorch's backward pass."""

from gradexplorer._version import __version__
from gradexplorer.core.workload import Workload

__all__ = ["Workload", "__version__"]
