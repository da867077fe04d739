"""The forged ingress group: a correctly signed event, then mutated so that its proof no
longer holds."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

from hypothesis import strategies as st

from .campaign import SOURCES, Campaign
from .strategies import (
    JSON_CT,
    TOKEN_CHARS,
    Req,
    document,
    dumps,
    encoded,
    json_values,
    random_secret,
    signature_headers,
)

TOLERANCE = 300  # the sources' signature window (seconds), as `desk up` configures them


def forged(c: Campaign) -> st.SearchStrategy[Req]:
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
        n = next(c.sequence)
        doc = document(source, f"forged-{c.seed}-{n}", "ticket.created", draw(json_values))
        body = dumps(doc)
        mutation = draw(st.sampled_from(mutations))
        secret = c.secrets[source]
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
            other = document(source, f"forged-{c.seed}-{n}-b", "ticket.created", None)
            sent = dumps(other)
        elif mutation == "stranger-secret":
            stranger = random_secret(draw(st.binary(min_size=1, max_size=40)))
            headers = dict(signature_headers(stranger, msg_id, stamp, body))
        elif mutation == "other-source":
            other_source = next(s for s in SOURCES if s != source)
            headers = dict(signature_headers(c.secrets[other_source], msg_id, stamp, body))
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
