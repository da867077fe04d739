"""Personal data in a reply that neither the conversation nor the cited knowledge holds
(`foreign_details`), found by `shared.personal` and compared after normalising (phone numbers
by their digits, postal addresses by their numbers and most of their words).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from .. import personal
from .text import folded, nfkc, tokens_of, undisguised

_LABELS = {
    "email": "an e-mail address",
    "phone": "a phone number",
    "address": "a postal address",
    "iban": "an IBAN",
    "vat": "a VAT number",
    "order": "an order number",
    "number": "a long number",
    "card": "a card number",
}


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text)


def _alnum(text: str) -> str:
    return re.sub(r"[^0-9a-z]", "", nfkc(text).casefold())


def _same_phone(a: str, b: str) -> bool:
    """Two numbers by their digits: equal, or one the other with a country/trunk prefix."""
    a, b = a.lstrip("0"), b.lstrip("0")
    short, long_ = sorted((a, b), key=len)
    return len(short) >= 7 and long_.endswith(short)


_DIGIT_RUN = re.compile(r"\+?\d[\d\s().\-/]{5,}\d")


@functools.lru_cache(maxsize=4096)
def _spans(text: str) -> tuple[personal.Span, ...]:
    """`shared.personal.spans`, kept for the texts screened again and again: the same knowledge
    passages and conversation for every draft of a ticket, at the drafter, inbox and sender."""
    return tuple(personal.spans(text))


def _hint(kind: str, value: str) -> str:
    """Enough of a value for the reviewer to find it in the reply, not the whole of it."""
    if kind == "email":
        local, _, domain = value.partition("@")
        return f"{local[:1]}…@{domain}"
    digits = _digits(value)
    if kind in ("phone", "card", "iban", "number") and len(digits) >= 4:
        return f"ending {digits[-4:]}"
    return value[:2] + "…" if len(value) > 3 else "…"


def _known_address(value: str, allowed_tokens: set[str]) -> bool:
    """An address is the same when its numbers and most of its words (CJK: characters) are in
    the allowed texts: "Lindenstr. 14, Berlin" and "Lindenstraße 14 in 10115 Berlin" are one,
    "221 Baker Street" and "12 Baker Street" are not."""
    tokens = tokens_of(value)
    if not tokens:
        return True
    numbers = [t for t in tokens if t.isdigit()]
    if any(n not in allowed_tokens for n in numbers):
        return False
    return sum(t in allowed_tokens for t in tokens) >= 0.75 * len(tokens)


def foreign_details(reply: str, allowed: Sequence[str]) -> list[str]:
    """The warnings for the personal data in `reply` that the `allowed` texts (the conversation
    and the knowledge) do not hold; a card number always."""
    warnings: list[str] = []
    folded_allowed = folded("\n".join(allowed))
    alnum_allowed = [_alnum(t) for t in allowed]
    phones_allowed = [_digits(m.group(0)) for t in allowed for m in _DIGIT_RUN.finditer(t)]
    phones_allowed += [_digits(s.text) for t in allowed for s in _spans(t) if s.kind == "phone"]
    allowed_tokens = {t for text in allowed for t in tokens_of(text)}
    seen: set[tuple[str, str]] = set()
    for span in _spans(undisguised(reply)):
        kind, value = span.kind, span.text
        if kind not in _LABELS or (kind, value) in seen:
            continue
        seen.add((kind, value))
        label = _LABELS[kind]
        if kind == "card":
            warnings.append(f"the reply contains a card number ({_hint(kind, value)})")
            continue
        if kind == "email":
            known = value.casefold() in folded_allowed
        elif kind == "phone":
            digits = _digits(value)
            known = any(_same_phone(digits, p) for p in phones_allowed if p)
        elif kind == "address":
            known = _known_address(value, allowed_tokens)
        else:
            token = _alnum(value)
            known = not token or any(token in a for a in alnum_allowed)
        if not known:
            warnings.append(
                f"the reply contains {label} ({_hint(kind, value)}) that is neither in this"
                " conversation nor in the cited knowledge"
            )
    return warnings


# what `shared.personal.redact` leaves in the examples a draft is shown
PLACEHOLDER = re.compile(
    r"\[(?:email|phone|url|address|iban|vat|card|order|number|name)\]", re.IGNORECASE
)
