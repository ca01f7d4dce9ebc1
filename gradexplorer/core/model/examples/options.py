"""Parsing of ``key=value`` options given to built-in examples."""

from __future__ import annotations

from gradexplorer.core.messages.errors import UserError


def parse_options(text: str) -> dict[str, str]:
    """``"blocks=500,width=8"`` (or ``:``-separated) -> ``{"blocks": "500", "width": "8"}``."""
    options: dict[str, str] = {}
    for part in text.replace(":", ",").split(","):
        part = part.strip()
        if not part:
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise UserError(f"bad example option {part!r}: expected key=value, e.g. blocks=500")
        options[key.strip()] = value.strip()
    return options


def take_int(options: dict[str, str], key: str, default: int, lo: int = 1, hi: int = 10**6) -> int:
    """Pop an integer option, checking its range."""
    raw = options.pop(key, None)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise UserError(f"example option {key}={raw!r} is not an integer") from None
    if not lo <= value <= hi:
        raise UserError(f"example option {key}={value} is out of range [{lo}, {hi}]")
    return value


def reject_unknown(options: dict[str, str], example: str, known: tuple[str, ...]) -> None:
    """Fail on options an example does not understand."""
    if options:
        names = ", ".join(sorted(options))
        accepted = ", ".join(known) if known else "none"
        raise UserError(f"example:{example} does not take option(s) {names} (accepted: {accepted})")
