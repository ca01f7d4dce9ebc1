"""``python -m gradexplorer``: the same as the ``gradexplorer`` command."""

import sys

from gradexplorer.cli import main

if __name__ == "__main__":
    sys.exit(main())
