"""The names the caller knows belong to a person (`find`), whole or by their parts, wherever
they stand in a text; an e-mail address given as a name is found as one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from .span import CJK, Span

_TITLES = frozenset(
    "mr mrs ms miss dr prof herr frau m mme mlle sr sra srta don doña sir madam".split()
)


def find(text: str, names: Iterable[str]) -> Iterator[Span]:
    """Where the `names` of a person stand in `text`: each whole (case aside), and each of its
    parts (titles aside) as written, capitalised or in capitals."""
    whole: set[str] = set()
    parts: set[str] = set()
    for raw in names:
        name = " ".join(str(raw).split()).strip(" ,;<>\"'")
        if len(name) < 2:
            continue
        if "@" in name:
            for m in re.finditer(re.escape(name), text, re.IGNORECASE):
                yield Span("email", m.start(), m.end(), m.group())
            continue
        whole.add(name)
        for part in re.split(r"[\s,]+", name):
            part = part.strip(".")
            if len(part) >= 2 and part.casefold() not in _TITLES and not part.isdigit():
                parts.add(part)
    for name in whole:
        for m in _word(name, ignore_case=True).finditer(text):
            yield Span("name", m.start(), m.end(), m.group())
    for part in parts - whole:
        for m in _word(part, ignore_case=False).finditer(text):
            yield Span("name", m.start(), m.end(), m.group())


def _word(name: str, *, ignore_case: bool) -> re.Pattern[str]:
    """`name` as a whole word (Chinese, Japanese and Korean names are not between spaces)."""
    if re.search(f"[{CJK}]", name):
        return re.compile(re.escape(name))
    if ignore_case:
        return re.compile(rf"(?<![\w]){re.escape(name)}(?![\w])", re.IGNORECASE)
    forms = {name, name[:1].upper() + name[1:], name.upper()}
    choice = "|".join(re.escape(f) for f in sorted(forms))
    return re.compile(rf"(?<![\w])(?:{choice})(?![\w])")
