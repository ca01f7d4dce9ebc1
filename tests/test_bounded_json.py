"""The JSON nesting depth measured without recursion equals the depth of the text with its
strings removed by a regular expression (the slower way it was measured before)."""

from __future__ import annotations

import json
import random
import re

import pytest

from gradexplorer.core.files.bounded_json import load_bounded, nesting_depth
from gradexplorer.core.messages.errors import UserError

STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)


def depth_by_regex(data: bytes) -> int:
    depth = deepest = 0
    for char in STRING.sub(b'""', data):
        depth += (char in b"[{") - (char in b"]}")
        deepest = max(deepest, depth)
    return deepest


@pytest.mark.parametrize("text", [
    b"", b"1", b'"["', b'["]]]", [[1]], "\\\\\\"" ]', b'{"a\\"[": [[{"b": "\\\\"}]]}',
    b'"\\\\"[[', b'[[["unterminated [[[[', b'\\"[[', b'["\\\\\\\\"]', b'[["x\\"]]"]]]',
])
def test_nesting_depth_of_crafted_texts(text):
    assert nesting_depth(text) == depth_by_regex(text)


def test_nesting_depth_of_random_texts_and_real_documents():
    rng = random.Random(0)
    pieces = [b"[", b"]", b"{", b"}", b",", b":", b"1", b'""', b'"[{"', b'"a\\"]"', b'"\\\\"',
              b'"\\\\\\"[" ]', b'"}\\\\"']  # backslashes only inside strings, as in JSON
    for _ in range(3000):
        text = b"".join(rng.choice(pieces) for _ in range(rng.randrange(0, 30)))
        if rng.random() < 0.2:
            text += b'"never closed [[[ \\" {'
        assert nesting_depth(text) == depth_by_regex(text), text
    document = {"nodes": [{"id": i, "name": f'n[{i}]"\\', "saved": {"s": [[i]]}} for i in range(50)]}
    data = json.dumps(document).encode()
    assert nesting_depth(data) == depth_by_regex(data) == 6


def test_a_document_nested_too_deep_is_one_line():
    with pytest.raises(UserError, match="nested too deep"):
        load_bounded("[" * 100_000 + "]" * 100_000, "meta 'graph'")
    assert load_bounded('{"a": ["[[[[", {"b": 1}]}', "x") == {"a": ["[[[[", {"b": 1}]}
