"""Dialogs: About, Open model."""
