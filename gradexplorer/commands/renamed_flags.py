"""Flags with an old name still accepted, with a one-line note; giving both names is refused."""

from __future__ import annotations

import argparse
import sys


class RenamedFlag(argparse.Action):
    """Stores into the new flag's ``dest`` and prints ``note`` (one line, on stderr)."""

    def __init__(self, option_strings, dest, new_flag: str = "", **kwargs) -> None:
        self.new_flag = new_flag
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(f"gradexplorer: {option_string} is now {self.new_flag}; the old name will go in "
              "a later release", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_renamed(group, old: str, new: str, dest: str, help: str | None = None,
                metavar: str | None = None, **kwargs) -> None:
    """The flag ``new`` storing into ``dest``, and ``old`` (hidden from ``--help``) as its old
    name; both at once is a usage error (exit status 2), as both names are in Python."""
    pair = group.add_mutually_exclusive_group()
    pair.add_argument(new, dest=dest, help=help, metavar=metavar, **kwargs)
    pair.add_argument(old, dest=dest, action=RenamedFlag, new_flag=new, help=argparse.SUPPRESS,
                      **kwargs)
