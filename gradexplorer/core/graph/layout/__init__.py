"""Node positions: our layered (Sugiyama-style) layout in numpy, or one of networkx's layouts.

``positions`` is the front door (``layout_graph``, ``layout_drawing``); ``layered`` assigns
layers and x coordinates; ``crossings`` and ``ordering`` reduce edge crossings. ``LAYOUTS``: their
names (here, so a view lists them before networkx is imported).
"""

LAYOUTS = ("layered", "spring", "kamada_kawai", "spectral", "shell", "multipartite")
