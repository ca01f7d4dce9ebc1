"""The main window and what it is made of: menus, toolbar, status bar, docks, start-up."""
