"""The backward graph: extract ``grad_fn`` nodes, attribute them to modules, collapse, lay out, export.

``extract.extract_graph`` walks ``loss.grad_fn`` iteratively into a ``networkx.DiGraph``;
``attribution`` ties nodes to modules and parameters; ``collapse`` folds modules; ``style`` is
the one look (palette, labels, node sizes) shared by the app and the exports; ``layout/`` gives
positions; ``export/`` writes JSON, GraphML, DOT, SVG and PNG.
"""
