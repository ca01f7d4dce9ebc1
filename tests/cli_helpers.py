"""What a command-line test asks of a refusal (Qt-free)."""

from __future__ import annotations


def one_line_error(code: int, out: str, err: str, *words: str) -> None:
    """Exit status 2 and one ``gradexplorer: error:`` line holding each of ``words``, no traceback."""
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gradexplorer: error: "), err
    assert "Traceback" not in out + err
    for word in words:
        assert word in lines[0], (word, lines[0])
