"""What runs on the training thread, and the mailbox back to the GUI (Qt-free: import contract)."""
