"""Least-privilege NATS users: each service may publish and subscribe only to its own subjects
plus the JetStream API subjects its consumers need. Rendered as a nats-server
`authorization` block by `desk nats-config`; used by the embedded stack and the k8s overlays.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from . import subjects
from .bus import inbox_prefix
from .streams import LEDGER_BUCKET, STATE_BUCKET

ADMIN = "admin"


@dataclass(frozen=True)
class Permissions:
    publish: list[str] = field(default_factory=list)
    subscribe: list[str] = field(default_factory=list)


def _bucket(bucket: str) -> list[str]:
    stream = f"KV_{bucket}"
    return [
        f"$KV.{bucket}.>",
        f"$JS.API.STREAM.INFO.{stream}",
        f"$JS.API.STREAM.MSG.GET.{stream}",
        f"$JS.API.DIRECT.GET.{stream}",
        f"$JS.API.DIRECT.GET.{stream}.>",
    ]


def _durable(stream: str, durable: str) -> list[str]:
    return [
        f"$JS.API.CONSUMER.INFO.{stream}.{durable}",
        f"$JS.API.CONSUMER.CREATE.{stream}.{durable}",
        f"$JS.API.CONSUMER.CREATE.{stream}.{durable}.>",
        f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}",
        f"$JS.ACK.{stream}.{durable}.>",
    ]


def _read_stream(stream: str) -> list[str]:
    """Ephemeral consumers and direct reads on a whole stream (reports, dead letters)."""
    return [
        f"$JS.API.CONSUMER.CREATE.{stream}.>",
        f"$JS.API.CONSUMER.DELETE.{stream}.>",
        f"$JS.API.CONSUMER.MSG.NEXT.{stream}.>",
        f"$JS.ACK.{stream}.>",
        f"$JS.API.STREAM.MSG.GET.{stream}",
    ]


def service_permissions(service: str) -> Permissions:
    """What `service` may do. Every service: its consumers, the ledger, its dead letters."""
    publish = [
        "$JS.API.INFO",
        *(f"$JS.API.STREAM.INFO.{s}" for s in subjects.STREAM_SUBJECTS),  # readiness
        subjects.dlq(service),
        *_bucket(LEDGER_BUCKET),
    ]
    for stream, durable in subjects.DURABLES.get(service, []):
        publish += _durable(stream, durable)
    own: dict[str, list[str]] = {
        "ingress": ["events.>"],
        "router": ["work.>"],
        "drafter": [subjects.INBOX_ITEM, subjects.INBOX_WITHDRAWN, subjects.INBOX_OVERDUE],
        "inbox_api": [
            subjects.INBOX_DECISION,
            # replaying a dead letter republishes it where it came from
            "events.>",
            "work.>",
            subjects.INBOX_ITEM,
            subjects.ALL_RESULTS,
            *_read_stream(subjects.DLQ),
            f"$JS.API.STREAM.MSG.DELETE.{subjects.DLQ}",
        ],
        "sender": [subjects.ALL_RESULTS],
        "reconciler": [
            "events.reconciler.>",
            subjects.result("report.daily"),
            *_bucket(STATE_BUCKET),
            *_read_stream(subjects.EVENTS),
            *_read_stream(subjects.RESULTS),
            *_read_stream(subjects.DLQ),
        ],
    }
    publish += own.get(service, [])
    return Permissions(publish=sorted(set(publish)), subscribe=[f"{inbox_prefix(service)}.>"])


SERVICES = ("ingress", "router", "drafter", "inbox_api", "sender", "reconciler")


def authorization_block(passwords: dict[str, str]) -> str:
    """A nats-server `authorization { users = [...] }` block; `admin` may do everything."""
    lines = ["authorization {", "  users = ["]
    for user, password in passwords.items():
        entry = f"    {{ user: {json.dumps(user)}, password: {json.dumps(password)}"
        if user != ADMIN:
            perms = service_permissions(user)
            entry += (
                ", permissions: { publish: { allow: " + json.dumps(perms.publish) + " },"
                " subscribe: { allow: " + json.dumps(perms.subscribe) + " } }"
            )
        lines.append(entry + " }")
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"
