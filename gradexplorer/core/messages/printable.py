"""Names and text from models and files shown safely: in a terminal, an HTML page, a spreadsheet.

Parameter names, model descriptions and manifest fields are untrusted text: a crafted
``\\x1b[2J`` would drive the terminal, a right-to-left override (U+202E) would reorder what
is read, ``<img …>`` would be markup, and ``=cmd|…`` a formula in a spreadsheet.
"""

from __future__ import annotations

import html
import re

CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # C0 and C1 control characters (ESC, BEL, newline)
# ... and the invisible marks that reorder or hide text: bidi embeddings, overrides and
# isolates, directional marks, zero-width characters and the byte-order mark
UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet reads as a formula


def printable(text: str) -> str:
    """``text`` with control and bidi characters (ESC, BEL, newlines, C1 codes, U+202E…)
    written as escapes: ``\\x1b``, ``\\u202e``."""
    return UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def html_text(text: object) -> str:
    """``text`` for an HTML page: printable, then markup escaped (quotes too)."""
    return html.escape(printable(str(text)))


def spreadsheet_cell(value: object) -> object:
    """A CSV cell a spreadsheet shows as written: text starting with ``=``, ``+``, ``-``,
    ``@``, tab or CR gets a leading ``'`` (OWASP's CSV-injection advice), so it is never
    evaluated as a formula; numbers, and text that reads as a number (``-0.5``), are kept."""
    if not isinstance(value, str) or not value.startswith(FORMULA_START):
        return value
    try:
        float(value)
    except ValueError:
        return "'" + value
    return value
