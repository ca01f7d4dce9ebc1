"""Qt-free observable models (psygnal), as napari's ``components``: what the views show.

- :class:`TimelineModel`: the run's loss and gradient-norm curves and the monitor's own
  gradient history, fed by a :class:`TimelineSource` (the in-app session now, a followed run
  directory later; see docs/architecture.md).
- :class:`SelectionModel`: the one selected node, module or parameter shared by every view.
- :class:`SessionModel`: the live session, its run state and attached hooks, and typed job
  results.
- :class:`GraphViewState`: the graph view's settings (layout, detail level, hook nodes, tint,
  gradient tracing), shown and set by the graph panel's controls.

They are changed on the GUI thread only (the controller applies what the worker sends); their
events call the widgets synchronously, and each widget redraws through its own throttle.
"""

from gradexplorer.gui.models.graph_view import GraphViewState
from gradexplorer.gui.models.selection import Selection, SelectionModel
from gradexplorer.gui.models.session import SessionModel
from gradexplorer.gui.models.timeline import Curve, StepPoint, TimelineModel, TimelineSource

__all__ = ["Curve", "GraphViewState", "Selection", "SelectionModel", "SessionModel", "StepPoint",
           "TimelineModel", "TimelineSource"]
