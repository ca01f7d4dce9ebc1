"""Run directories in the window: a followed run, runs overlaid for comparison."""
