"""What ingress is sent: one hypothesis strategy per input group (arbitrary, malformed,
edge, and the valid control group; the forged group is in `forgeries`)."""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import quote

from hypothesis import strategies as st

from .campaign import SOURCES, Campaign
from .strategies import (
    JSON_CT,
    TOKEN_CHARS,
    Req,
    carried_values,
    document,
    dumps,
    encoded,
    event_types,
    header_names,
    header_values,
    json_scalars,
    json_values,
    random_secret,
    signature_headers,
    surrogates,
    texts,
    valid_type,
)

METHODS = ("GET", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD")
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


def arbitrary(c: Campaign) -> st.SearchStrategy[Req]:
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
                        "/metrics",  # on the ops port only: 404 here
                        "/healthz",
                        "/readyz",
                    ]
                ),
            )
        )
        body = draw(
            st.one_of(
                st.binary(max_size=600),
                json_values.map(dumps),
                st.builds(document, st.sampled_from(SOURCES), texts, event_types, json_values).map(
                    dumps
                ),
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
            headers += [(name, msg_id if name == "webhook-id" else str(stamp)) for name in chosen]
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


def malformed(c: Campaign) -> st.SearchStrategy[Req]:
    def not_json(raw: bytes) -> bool:
        try:
            json.loads(raw)
        except (ValueError, RecursionError):
            return True
        return False

    @st.composite
    def build(draw: Any) -> Req:
        source = draw(st.sampled_from(SOURCES))
        n = next(c.sequence)
        kinds = ["not-json", "not-utf8", "id-too-long", "id-control-char", "wrong-media-type"]
        if source == "helpdesk":  # the email source has a fixed type
            kinds += ["no-type", "type-not-text", "type-invalid", "not-an-object"]
        kind = draw(st.sampled_from(kinds))
        event_id: Any = f"bad-{c.seed}-{n}"
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
        headers = signature_headers(c.secrets[source], msg_id, int(time.time()), body)
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


def edge(c: Campaign) -> st.SearchStrategy[Req]:
    @st.composite
    def build(draw: Any) -> Req:
        source = draw(st.sampled_from(SOURCES))
        n = next(c.sequence)
        event_id = f"edge-{c.seed}-{n}"
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
        headers = signature_headers(c.secrets[source], f"msg-edge-{n}", int(time.time()), body)
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


def valid(c: Campaign) -> st.SearchStrategy[Req]:
    @st.composite
    def build(draw: Any) -> Req:
        source = draw(st.sampled_from(SOURCES))
        n = next(c.sequence)
        prefix = draw(st.text(st.characters(min_codepoint=32, codec="utf-8"), max_size=40))
        event_id = f"{prefix}~{c.seed}-{n}"
        doc = document(source, event_id, draw(event_types), draw(carried_values))
        body = dumps(doc)
        hostile = draw(
            st.lists(
                st.tuples(
                    st.sampled_from(HOSTILE_HEADERS),
                    st.one_of(st.sampled_from(["all", "1", "0", "WORK", "x", "1s"]), header_values),
                ),
                max_size=4,
            )
        )
        headers = signature_headers(c.secrets[source], f"msg-{n}", int(time.time()), body)
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
