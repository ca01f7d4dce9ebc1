"""Write a laid-out backward graph to a file: ``files.export_graph`` picks the format by extension.

``EXPORT_FORMATS``: the extensions it writes (here, so the command line lists them before
networkx is imported).
"""

EXPORT_FORMATS = (".json", ".graphml", ".dot", ".svg")
