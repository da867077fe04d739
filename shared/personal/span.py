"""A piece of personal data found in a text (`Span`), its kinds (`KINDS`), and which of two
overlapping spans is kept (`RANK`).
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = (
    "email",
    "phone",
    "url",
    "address",
    "iban",
    "vat",
    "card",
    "order",
    "number",
    "name",
)


@dataclass(frozen=True)
class Span:
    kind: str
    start: int
    end: int
    text: str


# When two spans overlap the longer wins; of two as long, the more specific (higher) one.
RANK = {
    "email": 9,
    "iban": 8,
    "card": 8,
    "url": 7,
    "vat": 7,
    "name": 6,
    "address": 5,
    "order": 4,
    "phone": 3,
    "number": 1,
}

# the ideographs of Chinese, Japanese and Korean: their names and addresses are not between spaces
CJK = "\u3400-\u4dbf\u4e00-\u9fff"
