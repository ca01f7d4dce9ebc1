"""Write a laid-out backward graph to a file: ``files.export_graph`` picks the format by extension."""
