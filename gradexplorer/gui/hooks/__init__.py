"""Hooks in the app: the hook menu and the A/B window of a hook."""
