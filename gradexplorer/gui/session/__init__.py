"""The in-app training session's Qt side: the controller (clicks become jobs) and the worker thread."""
