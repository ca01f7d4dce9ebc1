"""Shortening dotted names so that they keep their meaning (Qt-free).

A name that does not fit loses whole components from the left down to its block (the first
numbered component, with the name before it), then the components between the block and its
layer, so that which block and which parameter stay readable:
``transformer.h.10.attn.c_attn.weight`` → ``…h.10.attn.c_attn.weight`` →
``h.10…c_attn.weight`` → ``h.10…weight`` → ``…weight``. Before the parameter loses its layer,
the block's name goes (``layer1.0.conv1.weight`` → ``…0.conv1.weight``, not ``layer1.0…weight``:
which of the block's weights?). A number is never cut, nor separated from the name before it
(``h.10``) while that name is kept, and the middle of a name is never cut out. Every view shows
the full name in its tooltip.

What a view shows together decides which forms are readable: a form that two of its names share
(``h.0…weight`` for GPT-2's ``h.0.attn.c_attn.weight`` and ``h.0.attn.c_proj.weight``;
``…1.conv2.weight`` for ResNet's ``layer2.1`` and ``layer3.1``; T5's encoder and decoder weights
without ``encoder.``/``decoder.``) is never shown: the view passes ``shared_forms`` of its names,
and a name that fits none of its own forms is cut on the right of its shortest distinct one, so
that what tells it from its siblings is read first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import lru_cache

ELLIPSIS = "…"


@lru_cache(maxsize=1 << 16)  # a run of 5,000 parameters: the table, tree and flow chart ask alike
def name_candidates(name: str) -> tuple[str, ...]:
    """Ever shorter forms of ``name``, the full name first."""
    parts = name.split(".")
    out = [name]
    numbers = [i for i, p in enumerate(parts) if p.isdigit() and i > 0]
    block = numbers[0] if numbers else len(parts)  # the outermost block index (h.10, layer3.0)
    # suffixes that start at a named component before the block: the block is kept whole
    for start in range(1, min(block, len(parts))):
        if not parts[start].isdigit():
            out.append(ELLIPSIS + ".".join(parts[start:]))
    if numbers:  # the block, then the layer and parameter: h.10…c_attn.weight, h.10…weight
        head = ".".join(parts[block - 1:block + 1])
        tails = [start for start in range(block + 2, len(parts)) if not parts[start].isdigit()]
        out += [head + ELLIPSIS + ".".join(parts[start:]) for start in tails[:-1]]
        # no layer between the block and the parameter (layer1.0.conv1.weight): the block index
        # with all that follows it before the block's name, so the layer stays (…0.conv1.weight)
        out.append(ELLIPSIS + ".".join(parts[block:]))
        out += [head + ELLIPSIS + ".".join(parts[start:]) for start in tails[-1:]]
    if len(parts) > 1:
        out.append(ELLIPSIS + parts[-1])
    shorter = [out[0]]
    for text in out[1:]:
        if len(text) < len(shorter[-1]):
            shorter.append(text)
    return tuple(shorter)


def shared_forms(names: Iterable[str]) -> frozenset[str]:
    """The shortened forms that more than one of ``names`` (what a view shows together) takes:
    read alone, such a form does not say which name it is."""
    seen: set[str] = set()
    shared: set[str] = set()
    for name in names:
        for text in set(name_candidates(name)[1:]):
            (shared if text in seen else seen).add(text)
    return frozenset(shared)


def shared_and_shortest(names: list[str]) -> tuple[frozenset[str], list[str]]:
    """``shared_forms(names)`` and each name's ``shortest_form`` among them, each name's forms
    made once (a table of 5,000 parameters opens)."""
    forms = [name_candidates(name) for name in names]
    seen: set[str] = set()
    shared: set[str] = set()
    for texts in forms:
        for text in set(texts[1:]):
            (shared if text in seen else seen).add(text)
    return frozenset(shared), [[t for t in texts if t not in shared][-1] for texts in forms]


def shortest_form(name: str, shared: frozenset[str] = frozenset()) -> str:
    """The shortest form of ``name`` that no other name in view shares: what a view must have
    room for to tell its names apart without cutting one (``…h.0.attn.c_proj.weight``: GPT-2's
    ``h.0…c_proj.weight`` is the MLP's too)."""
    return [text for text in name_candidates(name) if text not in shared][-1]


def elide_name(name: str, fits: Callable[[str], bool], shared: frozenset[str] = frozenset()) -> str:
    """The longest form of ``name`` for which ``fits(text)``, never one in ``shared`` (see
    ``shared_forms``); when none fits, the shortest left cut on the right (``h.10…c_at…``,
    ``…wei…``: still read from its start)."""
    candidates = [text for text in name_candidates(name) if text not in shared]
    for text in candidates:
        if fits(text):
            return text
    last = candidates[-1]
    for end in range(len(last) - 1, 0, -1):
        text = last[:end] + ELLIPSIS
        if fits(text):
            return text
    return ELLIPSIS


def elide_chars(name: str, chars: int, shared: frozenset[str] = frozenset()) -> str:
    """``name`` in at most ``chars`` characters (see ``elide_name``)."""
    return elide_name(name, lambda text: len(text) <= chars, shared)


def elide_to_width(name: str, advance: Callable[[str], float], width: float,
                   shared: frozenset[str] = frozenset()) -> str:
    """``name`` shortened to ``width`` pixels as measured by ``advance`` (a font's
    ``horizontalAdvance``), never to a form in ``shared``."""
    return elide_name(name, lambda text: advance(text) <= width, shared)
