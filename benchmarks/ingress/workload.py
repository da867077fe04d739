"""What every measure sends: distinct signed ticket events, each as an encoded HTTP request
and as the message ingress stores for it; and the slices the rounds take of them."""

from __future__ import annotations

import base64
import datetime as dt
import itertools
import json
import os
from dataclasses import dataclass

from desk.webhook import signed_headers
from services.ingress import nats_headers
from shared import headers as h
from shared import ids
from shared.helpdesk.events import ticket_event

from ..loadgen import encode_post

SOURCE = "helpdesk"
EVENT_TYPE = "ticket.created"


@dataclass(frozen=True)
class Message:
    subject: str
    body: bytes
    headers: dict[str, str]  # what ingress stores, `Nats-Msg-Id` included


@dataclass(frozen=True)
class Workload:
    requests: list[bytes]  # encoded HTTP/1.1 requests, signed
    messages: list[Message]  # the same events as ingress publishes them


def make_workload(count: int, secret: str, tag: str) -> Workload:
    """`count` distinct signed ticket events, each as a request and as the message it becomes."""
    requests: list[bytes] = []
    messages: list[Message] = []
    received = dt.datetime.now(dt.UTC)
    for i in range(count):
        event_id = f"evt_{tag}_{i:06d}"
        event = ticket_event(EVENT_TYPE, f"T{1001 + i % 41}", event_id=event_id, priority="normal")
        body = json.dumps(event).encode()
        headers = signed_headers("standard", secret, event, body)
        requests.append(encode_post(f"/webhooks/{SOURCE}", body, headers))
        msg_id = ids.ingress(SOURCE, event_id)
        stored = nats_headers(
            [("host", "127.0.0.1"), *headers.items()],
            SOURCE,
            event_id,
            EVENT_TYPE,
            msg_id,
            received,
        )
        stored[h.MSG_ID] = msg_id
        messages.append(Message(f"bench.{SOURCE}.{EVENT_TYPE}", body, stored))
    return Workload(requests, messages)


def new_secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(32)).decode()


def slices(count: int, rounds: int) -> list[tuple[int, int]]:
    """`count` cut into `rounds` consecutive, nearly equal slices."""
    rounds = max(1, min(rounds, count))
    edges = [count * r // rounds for r in range(rounds + 1)]
    return list(itertools.pairwise(edges))
