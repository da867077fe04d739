"""Where personal data stands in a text (`spans`), and the text with each piece replaced by a
typed placeholder (`redact`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from . import addresses, contacts, identifiers, people
from .span import RANK, Span


def spans(text: str, *, names: Iterable[str] = ()) -> list[Span]:
    """The personal data in `text`, in order and not overlapping (of two that overlap, the
    longer, then the more specific). `names` are the names (and addresses) the caller knows
    belong to a person, e.g. the customer's."""
    found = list(_candidates(text, names))
    found.sort(key=lambda s: (-(s.end - s.start), -RANK[s.kind], s.start))
    chosen: list[Span] = []
    taken = bytearray(len(text))
    for span in found:
        if any(taken[span.start : span.end]):
            continue
        taken[span.start : span.end] = b"\x01" * (span.end - span.start)
        chosen.append(span)
    chosen.sort(key=lambda s: s.start)
    return addresses.joined(text, chosen)


def redact(text: str, *, names: Iterable[str] = ()) -> str:
    """`text` with each of its `spans` replaced by its kind in brackets: `[email]`, `[phone]`…"""
    parts: list[str] = []
    at = 0
    for span in spans(text, names=names):
        parts.append(text[at : span.start])
        parts.append(f"[{span.kind}]")
        at = span.end
    parts.append(text[at:])
    return "".join(parts)


def _candidates(text: str, names: Iterable[str]) -> Iterator[Span]:
    """Every span any pattern finds, overlapping; a pattern whose text cannot be there (no
    digit, no `@`, none of its words) is not run: most replies hold few of them."""
    yield from contacts.emails(text)
    yield from contacts.links(text)
    yield from people.find(text, names)
    if not contacts.DIGIT.search(text):
        return  # everything below has a digit in it
    yield from contacts.phones(text)
    yield from identifiers.find(text)
    yield from addresses.find(text)
