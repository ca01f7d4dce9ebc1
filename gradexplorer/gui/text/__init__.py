"""How the views write numbers and names (Qt-free: import contract)."""
