"""The bad-input campaign: hostile and malformed requests against the running stack.

    python -m chaos.badinput [--examples N] [--seed S] [--keep]

Starts the real stack (`desk up`, as the fault suite does), then drives seeded hypothesis
strategies at ingress (`POST /webhooks/{source}`) and schemathesis cases generated from the
inbox API's /openapi.json:

- ingress, arbitrary: any method, path, headers and body; unsigned, garbage-signed, or signed
  with a key the source does not have;
- ingress, forged: a correctly signed event, then mutated (a body byte, a stranger's secret, the
  other source's secret, a stale or future timestamp, a changed webhook-id or timestamp, a
  damaged or missing signature, another body under the same signature);
- ingress, malformed: correctly signed, but not JSON, not UTF-8, or without a usable id or type;
- ingress, edge: correctly signed, at the edges of JSON (deep nesting, huge numbers, lone
  surrogates, NaN, duplicate keys, UTF-16); accepting or refusing are both fine, a 5xx is not;
- ingress, valid (the control group): correctly signed events with arbitrary data and hostile
  extra headers (broker and `Desk-*` headers), some sent twice;
- inbox API: every operation as reviewer, as viewer, without a token and with a wrong one; then
  decisions on the real waiting items.

It then prints one PASS/FAIL line per invariant, an INFO line of counts, and exits 0 only if
all pass: no 5xx (nor a dropped connection); no crashed process (same pids, every /readyz
200); no accepted forgery; no event from a rejected request (new EVENTS messages = control
events answered 202 as new; new decisions = decisions answered 202); every group answered as
its contract says; no failure inside a service (no ERROR log line, every consumer drained).
The var dir is kept (and named) on failure.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import itertools
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from shared import subjects
from shared.signatures import standard_sign

from .channel import ThreadedChannel
from .harness import (
    SERVICES,
    consumers,
    is_service,
    log,
    service_pid,
    start_stack,
    stop_stack,
)

SOURCES = ("helpdesk", "email")
TOLERANCE = 300  # the sources' signature window (seconds), as `desk up` configures them
DEMO_TICKETS = ("T1012", "T1041", "T1003")  # waiting items for the decision fuzz
OPEN_PATHS = ("/healthz", "/readyz", "/metrics")  # the only things ingress serves to anyone
METHODS = ("GET", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD")
FRAMING = {"content-length", "transfer-encoding", "host", "connection", "expect", "upgrade", "te"}
TOKEN_CHARS = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
HOSTILE_HEADERS = (
    "Nats-Msg-Id",
    "Nats-Rollup",
    "NATS-ROLLUP",
    "Nats-Expected-Stream",
    "Nats-Expected-Last-Sequence",
    "Nats-Expected-Last-Msg-Id",
    "Nats-TTL",
    "Desk-Source",
    "Desk-Event-Id",
    "Desk-Event-Type",
    "desk-correlation-id",
    "Authorization",
    "Cookie",
)


# -- what we saw ------------------------------------------------------------------------------


@dataclass
class Tally:
    tried: Counter[str] = field(default_factory=Counter)  # group -> requests answered
    classes: dict[str, Counter[str]] = field(default_factory=dict)  # group -> "2xx": n, …
    server_errors: list[str] = field(default_factory=list)  # 5xx or a dropped connection
    forgeries: list[str] = field(default_factory=list)  # accepted without proof
    unexpected: list[str] = field(default_factory=list)  # a 4xx/2xx the contract does not say
    unsendable: int = 0  # refused by our own HTTP client (not a request at all)
    accepted_new: int = 0  # ingress 202 duplicate:false
    duplicates: int = 0  # ingress 202 duplicate:true
    decisions: int = 0  # inbox decisions answered 202
    own_errors: list[str] = field(default_factory=list)  # bugs in this campaign, not the product

    def answered(self, group: str, status: int) -> None:
        self.tried[group] += 1
        self.classes.setdefault(group, Counter())[f"{status // 100}xx"] += 1

    def dropped(self, group: str, what: str, exc: Exception) -> None:
        self.tried[group] += 1
        self.classes.setdefault(group, Counter())["dropped"] += 1
        self.server_errors.append(f"{group} {what}: no answer ({exc.__class__.__name__})")


def total(tally: Tally, prefix: str) -> int:
    return sum(n for g, n in tally.tried.items() if g.startswith(prefix))


# -- requests and strategies ------------------------------------------------------------------


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


class Campaign:
    """The stack under test: its URLs and secrets, and what the strategies draw from."""

    def __init__(self, ingress: str, inbox: str, creds: dict[str, Any], seed_: int) -> None:
        self.ingress = ingress
        self.inbox = inbox
        self.secrets: dict[str, str] = creds["webhook_secrets"]
        self.reviewer: str = creds["reviewer_token"]
        self.viewer: str = creds["viewer_token"]
        self.seed = seed_
        self.sequence = itertools.count(1)
        self.tally = Tally()

    def redact(self, text: str) -> str:
        """`text` without any of the stack's secrets (an echoed header must not print one)."""
        for secret in (self.reviewer, self.viewer, *self.secrets.values()):
            text = text.replace(secret, "[secret]")
        return text

    # -- ingress strategies

    def arbitrary(self) -> st.SearchStrategy[Req]:
        @st.composite
        def build(draw: Any) -> Req:
            method = draw(st.one_of(st.just("POST"), st.sampled_from(METHODS)))
            path = draw(
                st.one_of(
                    st.sampled_from([f"/webhooks/{s}" for s in SOURCES]),
                    texts.map(lambda s: "/webhooks/" + quote(s, safe="", errors="replace")),
                    texts.map(lambda s: "/" + quote(s, safe="/", errors="replace")),
                    st.sampled_from(
                        [
                            "/webhooks/helpdesk/",
                            "/webhooks//helpdesk",
                            "/webhooks/HELPDESK",
                            "/webhooks/helpdesk/extra",
                            "/webhooks/%2e%2e/email",
                            "/webhooks/helpdesk%00",
                            "/webhooks/",
                        ]
                    ),
                )
            )
            body = draw(
                st.one_of(
                    st.binary(max_size=600),
                    json_values.map(dumps),
                    st.builds(
                        document, st.sampled_from(SOURCES), texts, event_types, json_values
                    ).map(dumps),
                    st.just(b""),
                    st.integers(200_000, 300_000).map(lambda n: b"[" + b"1," * (n // 2) + b"1]"),
                )
            )
            headers: list[tuple[str, str]] = []
            content_type = draw(
                st.one_of(
                    st.just("application/json"),
                    st.sampled_from(["application/cloudevents+json", "text/plain", "", "json"]),
                    header_values,
                    st.none(),
                )
            )
            if content_type is not None:
                headers.append(("content-type", content_type))
            signing = draw(st.sampled_from(["none", "garbage", "stranger", "partial"]))
            msg_id = draw(st.text(TOKEN_CHARS, min_size=1, max_size=30))
            stamp = int(time.time()) + draw(st.integers(-400, 400))
            if signing == "garbage":
                headers += [
                    ("webhook-id", msg_id),
                    ("webhook-timestamp", draw(st.one_of(st.just(str(stamp)), header_values))),
                    ("webhook-signature", draw(header_values)),
                ]
            elif signing == "stranger":  # a well-formed signature by a key no source has
                secret = random_secret(draw(st.binary(min_size=1, max_size=40)))
                headers += signature_headers(secret, msg_id, stamp, body)
            elif signing == "partial":
                chosen = draw(st.sets(st.sampled_from(["webhook-id", "webhook-timestamp"])))
                headers += [
                    (name, msg_id if name == "webhook-id" else str(stamp)) for name in chosen
                ]
            extra = draw(st.lists(st.tuples(header_names, header_values), max_size=5))
            return Req(
                "ingress/arbitrary",
                f"{method} {signing}",
                method,
                path,
                encoded(headers + extra),
                body,
            )

        return build()

    def forged(self) -> st.SearchStrategy[Req]:
        mutations = [
            "body-byte",
            "body-appended",
            "body-reformatted",
            "body-swapped",
            "stranger-secret",
            "other-source",
            "stale",
            "future",
            "timestamp-changed",
            "id-changed",
            "signature-byte",
            "signature-short",
            "signature-version",
            "header-missing",
        ]

        @st.composite
        def build(draw: Any) -> Req:
            source = draw(st.sampled_from(SOURCES))
            n = next(self.sequence)
            doc = document(source, f"forged-{self.seed}-{n}", "ticket.created", draw(json_values))
            body = dumps(doc)
            mutation = draw(st.sampled_from(mutations))
            secret = self.secrets[source]
            msg_id = f"msg-forged-{n}"
            stamp = int(time.time())
            sent = body
            expect = frozenset({401})
            headers = dict(signature_headers(secret, msg_id, stamp, body))
            if mutation == "body-byte":
                at = draw(st.integers(0, 2**16)) % len(body)  # draws never depend on the id
                flip = draw(st.integers(1, 255))
                sent = body[:at] + bytes([body[at] ^ flip]) + body[at + 1 :]
            elif mutation == "body-appended":
                sent = body + draw(st.binary(min_size=1, max_size=20))
            elif mutation == "body-reformatted":  # the same JSON, other bytes
                sent = json.dumps(doc, indent=draw(st.integers(0, 3))).encode()
            elif mutation == "body-swapped":
                other = document(source, f"forged-{self.seed}-{n}-b", "ticket.created", None)
                sent = dumps(other)
            elif mutation == "stranger-secret":
                stranger = random_secret(draw(st.binary(min_size=1, max_size=40)))
                headers = dict(signature_headers(stranger, msg_id, stamp, body))
            elif mutation == "other-source":
                other_source = next(s for s in SOURCES if s != source)
                headers = dict(signature_headers(self.secrets[other_source], msg_id, stamp, body))
            elif mutation in ("stale", "future"):
                skew = draw(st.integers(TOLERANCE + 30, 10**9))
                at_stamp = stamp - skew if mutation == "stale" else stamp + skew
                headers = dict(signature_headers(secret, msg_id, at_stamp, body))
                expect = frozenset({400})
            elif mutation == "timestamp-changed":
                shift = draw(st.integers(1, TOLERANCE - 30)) * draw(st.sampled_from([-1, 1]))
                headers["webhook-timestamp"] = str(stamp + shift)
            elif mutation == "id-changed":
                headers["webhook-id"] = msg_id + draw(st.text(TOKEN_CHARS, min_size=1, max_size=8))
            elif mutation in ("signature-byte", "signature-short"):
                raw = bytearray(base64.b64decode(headers["webhook-signature"].split(",", 1)[1]))
                if mutation == "signature-byte":
                    at = draw(st.integers(0, len(raw) - 1))
                    raw[at] ^= draw(st.integers(1, 255))
                else:
                    del raw[draw(st.integers(0, len(raw) - 1)) :]
                headers["webhook-signature"] = "v1," + base64.b64encode(bytes(raw)).decode()
            elif mutation == "signature-version":
                version = draw(st.sampled_from(["v2", "v1a", "V1", "v0", "", "v1 "]))
                _, value = headers["webhook-signature"].split(",", 1)
                headers["webhook-signature"] = f"{version},{value}".strip()
            else:  # header-missing
                del headers[draw(st.sampled_from(sorted(headers)))]
            return Req(
                "ingress/forged",
                mutation,
                "POST",
                f"/webhooks/{source}",
                encoded([JSON_CT, *headers.items()]),
                sent,
                expect,
                source,
            )

        return build()

    def malformed(self) -> st.SearchStrategy[Req]:
        def not_json(raw: bytes) -> bool:
            try:
                json.loads(raw)
            except (ValueError, RecursionError):
                return True
            return False

        @st.composite
        def build(draw: Any) -> Req:
            source = draw(st.sampled_from(SOURCES))
            n = next(self.sequence)
            kinds = ["not-json", "not-utf8", "id-too-long", "id-control-char", "wrong-media-type"]
            if source == "helpdesk":  # the email source has a fixed type
                kinds += ["no-type", "type-not-text", "type-invalid", "not-an-object"]
            kind = draw(st.sampled_from(kinds))
            event_id: Any = f"bad-{self.seed}-{n}"
            event_type: Any = "ticket.created"
            expect = frozenset({400})
            content_type = "application/json"
            body = b""
            if kind == "not-json":
                body = draw(st.binary(max_size=300).filter(not_json))
            elif kind == "not-utf8":
                body = b'{"id": "x", "type": "t", "data": "\xff\xfe\xc0"}'
            elif kind == "not-an-object":
                body = dumps(draw(st.one_of(json_scalars, st.lists(json_values, max_size=3))))
            else:
                if kind == "id-too-long":
                    event_id = "x" * draw(st.integers(257, 5000))
                elif kind == "id-control-char":
                    ctrl = draw(st.characters(max_codepoint=31))
                    event_id = f"bad{ctrl}{n}"
                elif kind == "no-type":
                    event_type = None
                elif kind == "type-not-text":
                    event_type = draw(
                        st.one_of(
                            st.booleans(),
                            st.floats(),
                            st.lists(st.integers(), max_size=2),
                            st.just({}),
                            st.just(" "),
                        )
                    )
                elif kind == "type-invalid":
                    event_type = draw(
                        st.text(max_size=30)
                        .filter(lambda t: bool(t.strip()))
                        .filter(lambda t: not valid_type(t.strip()))
                    )
                elif kind == "wrong-media-type":
                    content_type = draw(st.sampled_from(["text/plain", "application/xml", ""]))
                    expect = frozenset({415})
                doc = document(source, event_id, event_type, draw(json_values))
                if event_type is None:
                    doc.pop("type", None)
                body = json.dumps(doc, allow_nan=True).encode()
            msg_id = f"msg-bad-{n}"
            headers = signature_headers(self.secrets[source], msg_id, int(time.time()), body)
            return Req(
                "ingress/malformed",
                kind,
                "POST",
                f"/webhooks/{source}",
                encoded([("content-type", content_type), *headers]),
                body,
                expect,
                source,
            )

        return build()

    def edge(self) -> st.SearchStrategy[Req]:
        @st.composite
        def build(draw: Any) -> Req:
            source = draw(st.sampled_from(SOURCES))
            n = next(self.sequence)
            event_id = f"edge-{self.seed}-{n}"
            kind = draw(
                st.sampled_from(
                    [
                        "deep",
                        "huge-number",
                        "huge-number-id",
                        "surrogate-data",
                        "surrogate-id",
                        "nan",
                        "duplicate-keys",
                        "utf16",
                        "bom",
                        "id-number",
                        "id-256",
                        "id-padded",
                    ]
                )
            )
            id_key = "MessageID" if source == "email" else "id"
            head = f'{{"{id_key}": {json.dumps(event_id)}, "type": "ticket.created", "data": '
            if kind == "deep":
                depth = draw(st.integers(50, 20_000))
                body = (head + "[" * depth + "]" * depth + "}").encode()
            elif kind == "huge-number":
                body = (head + "1" * draw(st.integers(4000, 20_000)) + "}").encode()
            elif kind == "huge-number-id":
                digits = "9" * draw(st.integers(4000, 6000))
                body = f'{{"{id_key}": {digits}, "type": "ticket.created"}}'.encode()
            elif kind == "surrogate-data":
                body = (head + json.dumps({"ticket_id": draw(surrogates)}) + "}").encode()
            elif kind == "surrogate-id":
                doc = document(source, event_id + draw(surrogates), "ticket.created", None)
                body = dumps(doc)
            elif kind == "nan":
                body = f"{head}{draw(st.sampled_from(['NaN', 'Infinity', '-Infinity']))}}}".encode()
            elif kind == "duplicate-keys":
                twice = f'"{id_key}": "{event_id}", "{id_key}": "{event_id}-2"'
                body = f'{{{twice}, "type": "t"}}'.encode()
            elif kind in ("utf16", "bom"):
                text = json.dumps(document(source, event_id, "ticket.created", draw(json_values)))
                body = text.encode("utf-16") if kind == "utf16" else b"\xef\xbb\xbf" + text.encode()
            elif kind == "id-number":
                doc = document(source, draw(st.integers(-(10**30), 10**30)), "ticket.created", 1)
                body = dumps(doc)
            elif kind == "id-256":
                body = dumps(document(source, "y" * 250 + f"{n:06d}"[-6:], "ticket.created", 1))
            else:  # id-padded: blanks around the id are not part of it
                doc = document(source, f"  {event_id}\t", "ticket.created", 1)
                body = dumps(doc)
            headers = signature_headers(
                self.secrets[source], f"msg-edge-{n}", int(time.time()), body
            )
            return Req(
                "ingress/edge",
                kind,
                "POST",
                f"/webhooks/{source}",
                encoded([JSON_CT, *headers]),
                body,
                frozenset(),
                source,
            )

        return build()

    def valid(self) -> st.SearchStrategy[Req]:
        @st.composite
        def build(draw: Any) -> Req:
            source = draw(st.sampled_from(SOURCES))
            n = next(self.sequence)
            prefix = draw(st.text(st.characters(min_codepoint=32, codec="utf-8"), max_size=40))
            event_id = f"{prefix}~{self.seed}-{n}"
            doc = document(source, event_id, draw(event_types), draw(carried_values))
            body = dumps(doc)
            hostile = draw(
                st.lists(
                    st.tuples(
                        st.sampled_from(HOSTILE_HEADERS),
                        st.one_of(
                            st.sampled_from(["all", "1", "0", "WORK", "x", "1s"]), header_values
                        ),
                    ),
                    max_size=4,
                )
            )
            headers = signature_headers(self.secrets[source], f"msg-{n}", int(time.time()), body)
            return Req(
                "ingress/valid",
                f"{source} {doc.get('type', 'email.received')}",
                "POST",
                f"/webhooks/{source}",
                encoded([JSON_CT, *hostile, *headers]),
                body,
                frozenset({202}),
                source,
                resend=draw(st.integers(0, 4)) == 0,
            )

        return build()

    # -- ingress driving

    def send(self, client: httpx.Client, req: Req) -> httpx.Response | None:
        try:
            answer = client.request(req.method, req.path, headers=req.headers, content=req.body)
        except httpx.LocalProtocolError:
            self.tally.unsendable += 1
            return None
        except httpx.TransportError as exc:
            self.tally.dropped(req.group, f"{req.method} {req.path[:60]} ({req.label})", exc)
            return None
        self.judge_ingress(req, answer)
        return answer

    def judge_ingress(self, req: Req, answer: httpx.Response) -> None:
        t = self.tally
        status = answer.status_code
        t.answered(req.group, status)
        what = f"{req.group} {req.label}: {req.method} {req.path[:60]} -> {status}"
        if status >= 500:
            t.server_errors.append(f"{what} {answer.text[:120]}")
            return
        if 200 <= status < 300:
            if req.group in ("ingress/arbitrary", "ingress/forged", "ingress/malformed"):
                if req.group != "ingress/arbitrary" or not self.open_path(req):
                    t.forgeries.append(what)
                    return
            if status == 202:
                try:
                    duplicate = bool(answer.json()["duplicate"])
                except (ValueError, KeyError, TypeError):
                    t.unexpected.append(f"{what}: not the 202 answer {answer.text[:80]}")
                    return
                if duplicate:
                    t.duplicates += 1
                else:
                    t.accepted_new += 1
        if req.expect and status not in req.expect:
            t.unexpected.append(f"{what} (expected {sorted(req.expect)}) {answer.text[:100]}")

    @staticmethod
    def open_path(req: Req) -> bool:
        path = req.path.split("?", 1)[0]
        return req.method in ("GET", "HEAD") and path in OPEN_PATHS

    def control(self, client: httpx.Client, req: Req) -> None:
        """A valid event: 202 as new; if re-sent, 202 as a duplicate."""
        answer = self.send(client, req)
        if answer is None or answer.status_code != 202:
            return
        if answer.json().get("duplicate"):
            self.tally.unexpected.append(f"{req.group} {req.label}: first send answered duplicate")
        if req.resend:
            source = req.source
            body = req.body
            msg_id = f"msg-again-{next(self.sequence)}"
            kept = [(k, v) for k, v in req.headers if not k.startswith(b"webhook-")]
            again = Req(
                req.group,
                req.label + " (again)",
                "POST",
                req.path,
                kept
                + encoded(signature_headers(self.secrets[source], msg_id, int(time.time()), body)),
                body,
                frozenset({202}),
                source,
            )
            second = self.send(client, again)
            if second is not None and second.status_code == 202 and not second.json()["duplicate"]:
                self.tally.unexpected.append(f"{again.group} {again.label}: not a duplicate")

    def demo_events(self, client: httpx.Client) -> None:
        """Ticket events for demo tickets: they become the waiting items the decision fuzz uses."""
        for ticket in DEMO_TICKETS:
            n = next(self.sequence)
            doc = {
                "id": f"evt-badinput-{self.seed}-{ticket}",
                "type": "ticket.created",
                "data": {"ticket_id": ticket, "priority": "normal"},
            }
            body = dumps(doc)
            headers = signature_headers(
                self.secrets["helpdesk"], f"msg-{n}", int(time.time()), body
            )
            req = Req(
                "ingress/valid",
                f"demo {ticket}",
                "POST",
                "/webhooks/helpdesk",
                encoded([JSON_CT, *headers]),
                body,
                frozenset({202}),
                "helpdesk",
            )
            self.control(client, req)

    def ingress_campaign(self, examples: int) -> None:
        with httpx.Client(base_url=self.ingress, timeout=15) as client:
            self.demo_events(client)
            groups: list[tuple[str, st.SearchStrategy[Req], int, Callable[[Req], Any]]] = [
                ("arbitrary", self.arbitrary(), examples, lambda r: self.send(client, r)),
                ("forged", self.forged(), examples, lambda r: self.send(client, r)),
                ("malformed", self.malformed(), examples // 2, lambda r: self.send(client, r)),
                ("edge", self.edge(), max(examples // 4, 12), lambda r: self.send(client, r)),
                ("valid", self.valid(), max(examples // 4, 10), lambda r: self.control(client, r)),
            ]
            for offset, (name, strategy, count, act) in enumerate(groups):
                started = time.monotonic()
                run_examples(strategy, count, self.seed + offset, act, self.tally, name)
                log(
                    f"ingress {name}: {self.tally.tried['ingress/' + name]} requests "
                    f"in {time.monotonic() - started:.1f}s"
                )


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


# -- the inbox API ----------------------------------------------------------------------------


# the reviewer twice: it reaches the most code (and negative cases often drop the token)
AUTH_MODES = ("reviewer", "reviewer", "viewer", "none", "wrong")
DECIDING = ("POST",)  # operations a viewer may not perform (all POSTs of the API)


def wrong_tokens(reviewer: str) -> st.SearchStrategy[str]:
    """Authorization values that must not authenticate (never the real token as a bearer)."""
    printable = st.text(
        st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=60
    )
    return st.one_of(
        printable.map(lambda t: f"Bearer {t}").filter(lambda v: v != f"Bearer {reviewer}"),
        printable.map(lambda t: f"Bearer {reviewer}{t}"),
        printable.map(lambda t: f"Bearer {t}{reviewer}"),
        st.integers(0, max(len(reviewer) - 1, 0)).map(
            lambda i: f"Bearer {reviewer[:i]}{chr(ord(reviewer[i]) ^ 1)}{reviewer[i + 1 :]}"
        ),
        st.sampled_from(
            [f"Basic {reviewer}", f"Token {reviewer}", reviewer, "Bearer", f"Bearer{reviewer}"]
        ),
    )


def inbox_campaign(c: Campaign, examples: int) -> None:
    import requests
    import schemathesis
    from schemathesis.core.result import Ok
    from schemathesis.generation import GenerationMode

    t = c.tally
    schema = schemathesis.openapi.from_url(f"{c.inbox}/openapi.json")
    schema.config.update(base_url=c.inbox)
    operations = [r.ok() for r in schema.get_all_operations() if isinstance(r, Ok)]
    session = requests.Session()
    per_operation = max(examples // 4, 10)

    def call(case: Any, mode: str, header: str | None, group: str) -> None:
        headers = {"Authorization": header} if header is not None else {}
        if case.headers:
            case.headers = {k: v for k, v in case.headers.items() if k.lower() != "authorization"}
        what = f"{group} {mode}: {case.method} {case.path}"
        try:
            answer = case.call(session=session, headers=headers, timeout=15)
        except (requests.exceptions.InvalidHeader, requests.exceptions.InvalidURL, ValueError):
            t.unsendable += 1
            return
        except requests.exceptions.RequestException as exc:
            t.dropped(group, what, exc)
            return
        sent = answer.request.headers.get("Authorization")
        if sent != header:  # a negative case replaced or removed our token: judge what was sent
            mode = "none" if sent is None else "wrong"
            what = f"{group} {mode} (by schemathesis): {case.method} {case.path}"
        status = answer.status_code
        t.answered(f"{group}/{mode}", status)
        if status >= 500:
            t.server_errors.append(f"{what} -> {status} {answer.text[:120]}")
            return
        deciding = case.method.upper() in DECIDING
        if mode in ("none", "wrong") and status != 401:
            (t.forgeries if status < 300 else t.unexpected).append(f"{what} -> {status}")
        elif mode == "viewer" and deciding and status != 403:
            (t.forgeries if status < 300 else t.unexpected).append(f"{what} -> {status}")
        if status == 202 and case.path.endswith("/decision"):
            t.decisions += 1

    fixed: dict[str, st.SearchStrategy[str | None]] = {
        "reviewer": st.just(f"Bearer {c.reviewer}"),
        "viewer": st.just(f"Bearer {c.viewer}"),
        "none": st.none(),
        "wrong": wrong_tokens(c.reviewer),
    }
    modes_with_token = st.sampled_from(AUTH_MODES).flatmap(
        lambda mode: fixed[mode].map(lambda header: (mode, header))
    )
    for offset, op in enumerate(operations):
        started = time.monotonic()
        before = t.tried.copy()
        cases = st.one_of(
            op.as_strategy(GenerationMode.POSITIVE), op.as_strategy(GenerationMode.NEGATIVE)
        )
        strategy = st.tuples(cases, modes_with_token)
        run_examples(
            strategy,
            per_operation,
            c.seed + 100 + offset,
            lambda pair: call(pair[0], pair[1][0], pair[1][1], "inbox"),
            t,
            f"inbox {op.method.upper()} {op.path}",
        )
        sent = sum((t.tried - before).values())
        log(
            f"inbox {op.method.upper()} {op.path}: {sent} requests "
            f"in {time.monotonic() - started:.1f}s"
        )

    # decisions on the real waiting items (random ids almost never hit one)
    items = waiting_items(c)
    decision = next(op for op in operations if op.path.endswith("/decision"))
    started = time.monotonic()
    cases = st.sampled_from(items).flatmap(
        lambda item: st.one_of(
            decision.as_strategy(GenerationMode.POSITIVE, path_parameters={"id": item}),
            decision.as_strategy(GenerationMode.NEGATIVE, path_parameters={"id": item}),
        )
    )
    run_examples(
        cases,
        max(examples // 2, 20),
        c.seed + 200,
        lambda case: call(case, "reviewer", f"Bearer {c.reviewer}", "inbox-decisions"),
        t,
        "inbox decisions",
    )
    log(
        f"inbox decisions on {len(items)} real items: {t.tried['inbox-decisions/reviewer']} "
        f"requests in {time.monotonic() - started:.1f}s"
    )


def waiting_items(c: Campaign, timeout: float = 120) -> list[str]:
    deadline = time.monotonic() + timeout
    with httpx.Client(base_url=c.inbox, timeout=10) as client:
        while True:
            answer = client.get(
                "/api/items",
                params={"status": "waiting", "limit": "200"},
                headers={"Authorization": f"Bearer {c.reviewer}"},
            )
            if answer.status_code == 200:
                found = [i["id"] for i in answer.json()["items"]]
                if len(found) >= len(DEMO_TICKETS) or (found and time.monotonic() > deadline):
                    return found
            if time.monotonic() > deadline:
                raise RuntimeError(f"no waiting inbox item within {timeout:.0f}s")
            time.sleep(0.5)


# -- the broker's view ------------------------------------------------------------------------


async def stored_counts(admin_url: str) -> dict[str, int]:
    """Messages per ingress source in EVENTS, and decisions in INBOX."""
    from shared.bus import Bus

    bus = await Bus.connect(admin_url, service="badinput", reconnect=False)
    try:
        counts: dict[str, int] = {}
        for source in SOURCES:
            info = await bus.js.stream_info(
                subjects.EVENTS, subjects_filter=subjects.events_of(source)
            )
            counts[source] = sum((info.state.subjects or {}).values())
        info = await bus.js.stream_info(subjects.INBOX, subjects_filter=subjects.INBOX_DECISION)
        counts["decisions"] = sum((info.state.subjects or {}).values())
        return counts
    finally:
        await bus.close()


def wait_for(check: Callable[[], bool], timeout: float, every: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(every)


def drained(admin_url: str) -> bool:
    infos = asyncio.run(consumers(admin_url))
    return all(not (c.num_pending or 0) and not (c.num_ack_pending or 0) for c in infos.values())


def broker_pids(var: Path) -> set[int]:
    """The nats-server processes of this stack (their config files live in its var dir)."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    parts = f.read().split(b"\0")
            except OSError:
                continue
            if (
                parts
                and parts[0].endswith(b"nats-server")
                and str(var).encode() in b" ".join(parts)
            ):
                found.add(int(entry))
    return found


def readiness(state: dict[str, Any]) -> dict[str, int | str]:
    found: dict[str, int | str] = {}
    with httpx.Client(timeout=5) as client:
        for name in SERVICES:
            try:
                found[name] = client.get(f"{state['services'][name]['url']}/readyz").status_code
            except httpx.HTTPError as exc:
                found[name] = exc.__class__.__name__
    return found


def logged_errors(var: Path) -> tuple[Counter[str], list[str]]:
    """ERROR lines per service log, and a few of them (message and the error's last line)."""
    found: Counter[str] = Counter()
    samples: list[str] = []
    for path in sorted((var / "log").glob("*.log")):
        if path.stem not in SERVICES:
            continue
        with open(path, errors="replace") as f:
            for line in f:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if entry.get("level") not in ("ERROR", "CRITICAL"):
                    continue
                found[path.stem] += 1
                if len(samples) < 5:
                    error = (entry.get("error") or "").strip().splitlines()
                    samples.append(
                        f"{path.stem}: {str(entry.get('message', ''))[:80]}"
                        f"{' / ' + error[-1][:160] if error else ''}"
                    )
    return found, samples


# -- the run ----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m chaos.badinput", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument(
        "--examples",
        type=int,
        default=1500,
        help="examples per ingress input group (default 1500); an inbox API operation gets N/4",
    )
    parser.add_argument("--seed", type=int, default=1, help="hypothesis seed")
    parser.add_argument("--keep", action="store_true", help="keep the var dir even on success")
    args = parser.parse_args(argv)
    if args.examples < 4:
        raise SystemExit("--examples must be at least 4")

    from tests.fakellm import FakeLLM  # the test suite's real OpenAI-compatible server

    started = time.monotonic()
    var = Path(tempfile.mkdtemp(prefix="desk-badinput-"))
    log(f"var dir {var}; {args.examples} examples per group, seed {args.seed}")
    llm = FakeLLM().start()
    channel = ThreadedChannel().start()
    stack = None
    ok = False
    try:
        stack, state, creds = start_stack(var, llm.url, channel.url)
        admin_url = state["nats_admin_url"]
        pids = {name: service_pid(var, name) for name in SERVICES}
        brokers = broker_pids(var)
        log(f"stack up (supervisor pid {stack.pid}) in {time.monotonic() - started:.1f}s")
        c = Campaign(
            state["services"]["ingress"]["url"],
            state["services"]["inbox_api"]["url"],
            creds,
            args.seed,
        )
        before = asyncio.run(stored_counts(admin_url))
        c.ingress_campaign(args.examples)
        after_ingress = asyncio.run(stored_counts(admin_url))
        inbox_campaign(c, args.examples)
        decisions_seen = wait_for(
            lambda: (
                asyncio.run(stored_counts(admin_url))["decisions"] - before["decisions"]
                >= c.tally.decisions
            ),
            timeout=30,
        )
        after = asyncio.run(stored_counts(admin_url))
        quiet = wait_for(lambda: drained(admin_url), timeout=90, every=1.0)
        ok = report(
            c,
            var,
            state,
            stack.poll() is None,
            pids,
            bool(brokers) and brokers == broker_pids(var),
            before,
            after_ingress,
            after,
            decisions_seen,
            quiet,
            started,
        )
    except Exception as exc:
        log(f"campaign error: {exc.__class__.__name__}: {exc}")
        print(f"FAIL campaign: {exc.__class__.__name__}: {exc}", flush=True)
    finally:
        if stack is not None:
            stop_stack(stack)
        channel.stop()
        llm.stop()
        if ok and not args.keep:
            shutil.rmtree(var, ignore_errors=True)
        else:
            log(f"logs kept in {var}/log (the stack's own output in {var}/desk-up.log)")
    print("badinput: OK" if ok else "badinput: FAILED", flush=True)
    return 0 if ok else 1


def report(
    c: Campaign,
    var: Path,
    state: dict[str, Any],
    supervisor_alive: bool,
    pids: dict[str, int | None],
    same_broker: bool,
    before: dict[str, int],
    after_ingress: dict[str, int],
    after: dict[str, int],
    decisions_seen: bool,
    quiet: bool,
    started: float,
) -> bool:
    t = c.tally
    lines: list[tuple[bool, str, str]] = []

    lines.append(
        (
            not t.server_errors,
            "no 5xx",
            f"{len(t.server_errors)} server errors or dropped connections in "
            f"{sum(t.tried.values())} requests"
            f"{': ' + ' | '.join(t.server_errors[:5]) if t.server_errors else ''}",
        )
    )

    now = {name: service_pid(var, name) for name in SERVICES}
    changed = [
        f"{n} {pids[n]}->{now[n]}"
        for n in SERVICES
        if not pids[n] or now[n] != pids[n] or not is_service(pids[n] or 0, n)
    ]
    ready = readiness(state)
    not_ready = {n: s for n, s in ready.items() if s != 200}
    lines.append(
        (
            supervisor_alive and same_broker and not changed and not not_ready,
            "no crashed process",
            f"services with the same pid as at the start {len(SERVICES) - len(changed)}/"
            f"{len(SERVICES)}{' (changed ' + ', '.join(changed) + ')' if changed else ''}; "
            f"/readyz 200 {len(ready) - len(not_ready)}/{len(ready)}"
            f"{' ' + str(not_ready) if not_ready else ''}; nats-server same pid {same_broker}; "
            f"supervisor alive {supervisor_alive}",
        )
    )

    lines.append(
        (
            not t.forgeries,
            "no accepted forgery",
            f"{len(t.forgeries)} accepted of {t.tried['ingress/forged']} forged and "
            f"{t.tried['ingress/arbitrary']} unsigned/garbage-signed ingress requests and "
            f"{sum(n for g, n in t.tried.items() if g.endswith(('/none', '/wrong', '/viewer')))} "
            f"inbox requests with no token, a wrong one or a viewer's"
            f"{': ' + ' | '.join(t.forgeries[:5]) if t.forgeries else ''}",
        )
    )

    new_events = sum(after_ingress[s] - before[s] for s in SOURCES)
    late_events = sum(after[s] - after_ingress[s] for s in SOURCES)
    new_decisions = after["decisions"] - before["decisions"]
    rejected = total(t, "ingress") - t.accepted_new - t.duplicates
    lines.append(
        (
            new_events == t.accepted_new
            and t.accepted_new > 0
            and new_decisions == t.decisions
            and decisions_seen,
            "no event from a rejected request",
            f"EVENTS from ingress sources +{new_events} = control events answered 202 as new "
            f"{t.accepted_new} (duplicates answered {t.duplicates}, rejected requests {rejected}; "
            f"+{late_events} during the inbox phase, i.e. dead-letter replays); decisions "
            f"+{new_decisions} = decisions answered 202 {t.decisions}",
        )
    )

    lines.append(
        (
            not t.unexpected and not t.own_errors,
            "contract",
            f"{len(t.unexpected)} answers other than the group's contract"
            f"{': ' + ' | '.join(t.unexpected[:5]) if t.unexpected else ''}; "
            f"campaign errors {len(t.own_errors)}"
            f"{': ' + ' | '.join(t.own_errors[:3]) if t.own_errors else ''}",
        )
    )

    errors, samples = logged_errors(var)
    lines.append(
        (
            not errors and quiet,
            "no failure inside a service",
            f"error log lines {dict(errors) or 0}"
            f"{': ' + ' | '.join(samples) if samples else ''}; every consumer drained "
            f"afterwards (nothing pending or unacknowledged) {quiet}",
        )
    )

    for good, name, text in lines:
        print(f"{'PASS' if good else 'FAIL'} {name}: {c.redact(text)}", flush=True)
    per_group = "; ".join(
        f"{g} {t.tried[g]} {dict(sorted(t.classes.get(g, Counter()).items()))}"
        for g in sorted(t.tried)
    )
    print(
        f"INFO counts: inputs tried {sum(t.tried.values())} (ingress {total(t, 'ingress')}, "
        f"inbox API {total(t, 'inbox')}); {per_group}; refused by our own client "
        f"{t.unsendable}; wall time {time.monotonic() - started:.0f}s",
        flush=True,
    )
    return all(good for good, _, _ in lines)


if __name__ == "__main__":
    sys.exit(main())
