"""Shortening dotted names so that they keep their meaning (Qt-free).

A name that does not fit loses whole components from the left, keeping the last ones and the
block index: ``transformer.h.10.attn.c_attn.weight`` → ``…h.10.attn.c_attn.weight`` →
``…h.10.…c_attn.weight`` → ``…weight``; a number is never cut, nor separated from the name
before it (``h.10``), and the middle of a name is never cut out. Every view shows the full name
in its tooltip.
"""

from __future__ import annotations

from collections.abc import Callable

ELLIPSIS = "…"


def name_candidates(name: str) -> list[str]:
    """Ever shorter forms of ``name``, the full name first."""
    parts = name.split(".")
    out = [name]
    # suffixes that start at a named component (a number keeps the name before it)
    starts = [i for i in range(1, len(parts)) if not parts[i].isdigit()]
    numbers = [i for i, p in enumerate(parts) if p.isdigit() and i > 0]
    last_number = numbers[-1] if numbers else None
    for start in starts:
        if last_number is not None and start > last_number - 1:
            prefix = block_prefix(parts, last_number)
            if start > last_number + 1:  # components between the block and the suffix dropped
                out.append(prefix + ELLIPSIS + ".".join(parts[start:]))
            elif start == last_number + 1:
                out.append(prefix + ".".join(parts[start:]))
        else:
            out.append(ELLIPSIS + ".".join(parts[start:]))
    if last_number is not None and len(parts) - 1 > last_number:
        out.append(block_prefix(parts, last_number) + ELLIPSIS + parts[-1])
    if len(parts) > 1:
        out.append(ELLIPSIS + parts[-1])
    shorter = [out[0]]
    for text in out[1:]:
        if len(text) < len(shorter[-1]):
            shorter.append(text)
    return shorter


def block_prefix(parts: list[str], number: int) -> str:
    """``…h.10.`` : the block index with the name before it (no ``…`` when that is the first)."""
    block = ".".join(parts[number - 1:number + 1]) + "."
    return block if number == 1 else ELLIPSIS + block


def elide_name(name: str, fits: Callable[[str], bool]) -> str:
    """The longest form of ``name`` for which ``fits(text)``; when even ``…last`` does not fit,
    the last component cut on the right (``…wei…``: still read from its start)."""
    candidates = name_candidates(name)
    for text in candidates:
        if fits(text):
            return text
    last = candidates[-1]
    for end in range(len(last) - 1, 0, -1):
        text = last[:end] + ELLIPSIS
        if fits(text):
            return text
    return ELLIPSIS


def elide_chars(name: str, chars: int) -> str:
    """``name`` in at most ``chars`` characters (see ``elide_name``)."""
    return elide_name(name, lambda text: len(text) <= chars)


def elide_to_width(name: str, advance: Callable[[str], float], width: float) -> str:
    """``name`` shortened to ``width`` pixels as measured by ``advance`` (a font's
    ``horizontalAdvance``)."""
    return elide_name(name, lambda text: advance(text) <= width)
