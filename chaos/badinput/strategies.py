"""What requests are made of: the request, its signature, hypothesis strategies for headers
and JSON, and the seeded loop that draws examples."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from shared import subjects
from shared.signatures import standard_sign

from .tally import Tally

FRAMING = {"content-length", "transfer-encoding", "host", "connection", "expect", "upgrade", "te"}
TOKEN_CHARS = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass
class Req:
    group: str
    label: str  # what kind of input, for the report (never a secret)
    method: str
    path: str
    headers: list[tuple[bytes, bytes]]
    body: bytes
    expect: frozenset[int] = frozenset()  # empty: any status below 500 is fine
    source: str = ""
    resend: bool = False  # valid control events: send once more, expect duplicate:true


def random_secret(key: bytes) -> str:
    return "whsec_" + base64.b64encode(key).decode()


def signature_headers(secret: str, msg_id: str, stamp: int, body: bytes) -> list[tuple[str, str]]:
    return [
        ("webhook-id", msg_id),
        ("webhook-timestamp", str(stamp)),
        ("webhook-signature", standard_sign(secret, msg_id, stamp, body)),
    ]


def encoded(pairs: Iterable[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in pairs]


JSON_CT = ("content-type", "application/json")
header_names = st.text(TOKEN_CHARS, min_size=1, max_size=24).filter(
    lambda n: n.lower() not in FRAMING
)
# what HTTP/1.1 lets a header value be: visible ASCII and obs-text, inner spaces and tabs
header_values = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"),
    max_size=120,
).map(lambda s: s.strip(" \t"))
surrogates = st.sampled_from(["\ud800", "\udfff", "a\udc80b", "\udbff\udfff"])
unicode_texts = st.text(st.characters(codec="utf-8"), max_size=40)  # no lone surrogates
texts = st.one_of(st.text(st.characters(exclude_categories=()), max_size=40), surrogates)


def json_of(text: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        text,
    )
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(text, inner, max_size=4)
        ),
        max_leaves=12,
    )


json_values = json_of(texts)  # lone surrogates included: not every such value can be carried
carried_values = json_of(unicode_texts)  # what a valid event may hold
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), texts)
event_types = st.one_of(
    st.sampled_from(["ticket.created", "ticket.updated", "ticket.comment_added", "email.received"]),
    st.from_regex(r"\A[A-Za-z0-9_-]{1,10}(\.[A-Za-z0-9_-]{1,10}){0,3}\Z", fullmatch=True),
)


def dumps(value: Any) -> bytes:
    return json.dumps(value).encode()


def valid_type(value: str) -> bool:
    try:
        subjects.token(value)
    except subjects.SubjectError:
        return False
    return True


def document(source: str, event_id: Any, event_type: Any, data: Any) -> dict[str, Any]:
    if source == "email":  # inbound mail: the id is MessageID, the type is fixed
        return {"MessageID": event_id, "From": "a@example.com", "Subject": "Hi", "Extra": data}
    return {"id": event_id, "type": event_type, "data": data}


def run_examples(
    strategy: st.SearchStrategy[Any],
    count: int,
    seed_value: int,
    act: Callable[[Any], Any],
    tally: Tally,
    name: str,
) -> None:
    """Draw `count` examples from `strategy` (seeded, generation only) and act on each.

    Nothing here raises into hypothesis: every outcome is tallied, so no shrinking happens and
    one bad answer does not end the run.
    """

    @seed(seed_value)
    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )
    @given(example=strategy)
    def each(example: Any) -> None:
        try:
            act(example)
        except Exception as exc:  # a bug in the campaign itself: report it, keep going
            tally.own_errors.append(f"{name}: {exc.__class__.__name__}: {str(exc)[:160]}")

    each()
