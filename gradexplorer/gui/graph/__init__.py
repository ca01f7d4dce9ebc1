"""The backward-graph view: drawing data, canvas, view, layout worker, panel."""
