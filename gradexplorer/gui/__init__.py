"""The desktop app: Qt widgets observing gradexplorer's core objects."""
