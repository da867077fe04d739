"""What the pages show, computed without I/O: ages, UTC times, word diffs between drafts, and
which messages of a long conversation stay visible."""

from __future__ import annotations

import datetime as dt
import difflib
import re
from typing import Any, Literal

from shared import clock

KEEP_MESSAGES = 4  # a longer conversation shows its last few; the rest behind "show all"

Op = Literal["equal", "insert", "delete"]
LineKind = Literal["same", "removed", "added", "gap"]
Line = tuple[LineKind, list[tuple[Op, str]]]
_TOKEN = re.compile(r"\s+|\w+|[^\w\s]")


def age(created: dt.datetime, now: dt.datetime) -> str:
    """How long an item has waited, the way a person says it: "3 min", "2 h", "4 d"."""
    seconds = max(0, int((now - created).total_seconds()))
    if seconds < 60:
        return "< 1 min"
    if seconds < 3600:
        return f"{seconds // 60} min"
    if seconds < 86400:
        return f"{seconds // 3600} h"
    return f"{seconds // 86400} d"


def diff(before: str, after: str) -> list[tuple[Op, str]]:
    """The insertions and deletions that turn `before` into `after`: by line, then by word
    inside the lines that changed. Adjacent pieces of the same kind are merged."""
    out: list[tuple[Op, str]] = []

    def add(op: Op, text: str) -> None:
        if not text:
            return
        if out and out[-1][0] == op:
            out[-1] = (op, out[-1][1] + text)
        else:
            out.append((op, text))

    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        old, new = "".join(a[i1:i2]), "".join(b[j1:j2])
        if tag == "equal":
            add("equal", old)
        elif tag == "replace":
            x, y = _TOKEN.findall(old), _TOKEN.findall(new)
            words = difflib.SequenceMatcher(None, x, y, autojunk=False)
            for op, k1, k2, m1, m2 in words.get_opcodes():
                if op == "equal":
                    add("equal", "".join(x[k1:k2]))
                else:
                    add("delete", "".join(x[k1:k2]))
                    add("insert", "".join(y[m1:m2]))
        else:
            add("delete", old)
            add("insert", new)
    return out


def changes(before: str, after: str, context: int = 2) -> list[Line]:
    """What changed between two replies, line by line: removed and added lines (the words that
    changed marked inside them) with `context` unchanged lines around each change; longer runs
    of unchanged lines become one gap. Empty when nothing changed."""
    a, b = before.splitlines(), after.splitlines()
    ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    if all(tag == "equal" for tag, *_ in ops):
        return []
    out: list[Line] = []
    for n, (tag, i1, i2, j1, j2) in enumerate(ops):
        if tag == "equal":
            head = context if n > 0 else 0
            tail = context if n < len(ops) - 1 else 0
            same = a[i1:i2]
            if len(same) > head + tail + 1:  # a gap hides two lines or more
                shown: list[str | None] = [*same[:head], None, *same[len(same) - tail :]]
            else:
                shown = list(same)
            out.extend(("same", [("equal", t)]) if t is not None else ("gap", []) for t in shown)
            continue
        segments = diff("\n".join(a[i1:i2]), "\n".join(b[j1:j2]))
        if i2 > i1:
            out.extend(("removed", line) for line in _side(segments, "delete"))
        if j2 > j1:
            out.extend(("added", line) for line in _side(segments, "insert"))
    return out


def _side(segments: list[tuple[Op, str]], op: Op) -> list[list[tuple[Op, str]]]:
    """One side of a diff (what went, or what came), split into lines; changed words separated
    only by spaces are marked as one run."""
    kept: list[tuple[Op, str]] = []
    for kind, text in segments:
        if kind not in ("equal", op):
            continue
        if kind == op and len(kept) >= 2 and kept[-2][0] == op and kept[-1][1].strip(" ") == "":
            space = kept.pop()[1]
            kept[-1] = (op, kept[-1][1] + space + text)
        elif kept and kept[-1][0] == kind:
            kept[-1] = (kind, kept[-1][1] + text)
        else:
            kept.append((kind, text))
    lines: list[list[tuple[Op, str]]] = [[]]
    for op, text in kept:
        for k, piece in enumerate(text.split("\n")):
            if k:
                lines.append([])
            if piece:
                lines[-1].append((op, piece))
    return lines


def fold(
    messages: list[dict[str, Any]], answered: list[str], keep: int = KEEP_MESSAGES
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(earlier, recent): the last `keep` messages, and every message the draft answers, are
    recent; the ones before them are earlier (shown on asking). Each is marked `answered`."""
    marked = [{**m, "answered": m.get("id") in answered} for m in messages]
    start = max(0, len(marked) - keep)
    first = next((i for i, m in enumerate(marked) if m["answered"]), start)
    start = min(start, first)
    return marked[:start], marked[start:]


def when(stamp: str) -> dt.datetime:
    """An ISO time as an aware datetime (naive ones are UTC)."""
    return clock.parse(stamp)


def utc(stamp: str | None) -> str:
    """An ISO time as the page shows times: `2026-11-30 09:10 UTC`."""
    if not stamp:
        return "—"
    try:
        return when(stamp).astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    except ValueError:
        return stamp
