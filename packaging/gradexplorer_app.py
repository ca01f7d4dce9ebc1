"""PyInstaller entry script: the ``gradexplorer`` command; no arguments opens the app."""

import multiprocessing
import sys

from gradexplorer.cli import main

if __name__ == "__main__":
    multiprocessing.freeze_support()  # a frozen child process must not start the app again
    sys.exit(main())
