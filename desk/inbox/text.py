"""Text from the inbox, made safe and short for a terminal: one line, indented, ages, times."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from shared import clock

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # keeps \t and \n


def age(created_at: str | None, now: dt.datetime | None = None) -> str:
    """How long ago, in the largest whole unit: 12s, 4m, 2h, 3d."""
    if not created_at:
        return "-"
    try:
        then = clock.parse(created_at)
    except ValueError:
        return "?"
    seconds = max(0, int(((now or dt.datetime.now(dt.UTC)) - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def when(stamp: str | None) -> str:
    """An ISO timestamp as `2025-01-02 10:04:05 UTC`."""
    if not stamp:
        return "-"
    try:
        moment = clock.parse(stamp)
    except ValueError:
        return one_line(stamp)
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def indented(text: str, first: str = "  ") -> str:
    """Multi-line text under a heading, each line cleaned and indented like the first."""
    rest = " " * len(first)
    lines = clean(text.strip("\n")).splitlines() or [""]
    return "\n".join((first if i == 0 else rest) + line for i, line in enumerate(lines))


def one_line(value: Any) -> str:
    if value is None:
        return "-"
    return clean(" ".join(str(value).split()))


def clean(text: str) -> str:
    """Show control characters (terminal escapes from outside) as `\\xNN`, never run them."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
