"""Least-privilege NATS users, derived from each service's declaration in `shared.catalog`.

A service may publish to the subjects it declares, read only the durable consumers it owns (by
name; the admin creates them), read single messages of the streams it declares, write only its
own ledger bucket (and the buckets it declares), read the buckets it declares, write its own
dead letters, and receive replies only on its own inbox prefix. Rendered as a nats-server
`authorization` block by `desk nats-config`; used by the embedded stack and the Kubernetes
overlays.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from . import subjects
from .bus import inbox_prefix
from .catalog import ROLES, SERVICE_NAMES, ConsumerSpec, ServiceSpec, spec

ADMIN = "admin"
SERVICES = SERVICE_NAMES  # the six services; `USERS` adds the outside roles
USERS: tuple[str, ...] = tuple(s.name for s in ROLES)


@dataclass(frozen=True)
class Permissions:
    publish: list[str] = field(default_factory=list)
    subscribe: list[str] = field(default_factory=list)


def _kv_stream(bucket: str) -> str:
    return f"KV_{bucket}"


def _read_messages(stream: str) -> list[str]:
    """Single-message reads (by sequence, or the last/next on a subject); no consumers."""
    return [
        f"$JS.API.STREAM.INFO.{stream}",
        f"$JS.API.STREAM.MSG.GET.{stream}",
        f"$JS.API.DIRECT.GET.{stream}",
        f"$JS.API.DIRECT.GET.{stream}.>",
    ]


def _durable(c: ConsumerSpec) -> list[str]:
    """Read one named consumer. Nobody but the admin creates or changes consumers: a create
    request carries the whole configuration, and one pointing a push consumer's delivery at
    another subject would republish the stream there. `desk provision` creates them all."""
    return [
        f"$JS.API.CONSUMER.INFO.{c.stream}.{c.durable}",
        f"$JS.API.CONSUMER.MSG.NEXT.{c.stream}.{c.durable}",
        f"$JS.ACK.{c.stream}.{c.durable}.>",
    ]


def grants(s: ServiceSpec) -> Permissions:
    publish = [
        "$JS.API.INFO",
        *(f"$JS.API.STREAM.INFO.{name}" for name in subjects.STREAM_SUBJECTS),  # readiness
        *s.publishes,
    ]
    if s.dead_letters:
        publish.append(subjects.dlq(s.name))
    for c in s.consumers:
        publish += _durable(c)
    for stream in s.reads:
        publish += _read_messages(stream)
    for stream in s.deletes:
        publish.append(f"$JS.API.STREAM.MSG.DELETE.{stream}")
    for bucket in s.buckets_written():
        publish += [f"$KV.{bucket}.>", *_read_messages(_kv_stream(bucket))]
    for bucket in s.kv_reads:
        publish += _read_messages(_kv_stream(bucket))
    return Permissions(publish=sorted(set(publish)), subscribe=[f"{inbox_prefix(s.name)}.>"])


def service_permissions(service: str) -> Permissions:
    """What the service or role `service` may do on the broker."""
    return grants(spec(service))


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
