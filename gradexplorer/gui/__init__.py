"""The desktop app: Qt widgets observing gradexplorer's core objects.

``app`` starts it; beside it the app-wide parts (theme, throttle, settings, errors, crash log).
Folders: ``window`` (MainWindow, menus, toolbar, docks, start-up), ``session`` (the in-app
session's controller and training thread), ``training`` and ``text`` and ``models`` (Qt-free:
an import contract keeps them so), ``graph``, ``plots``, ``panels`` (the other dock widgets),
``runs`` (followed and compared run directories), ``hooks``, ``dialogs``, ``snapshots``.
docs/architecture.md has the map.
"""
