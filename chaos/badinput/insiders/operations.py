"""Every operation for a user, marked declared or not: data subjects, inboxes, buckets, the
streams' and consumers' API, core subscriptions, and the `config` probes."""

from __future__ import annotations

import json

from shared import catalog, subjects
from shared.bus import inbox_prefix
from shared.catalog import ROLES, ConsumerSpec, ServiceSpec, matches
from shared.permissions import USERS

from .inventory import buckets, concrete, data_subjects, may_publish, readable, streams
from .probe import PUBLISH, REQUEST, SUBSCRIBE, WORD, Probe

_ACK_TAIL = "1.1.1.1700000000000000000.0"  # delivered.stream_seq.consumer_seq.timestamp.pending
_STREAM_ADMIN = ("CREATE", "UPDATE", "DELETE", "PURGE", "SNAPSHOT", "RESTORE")
_CONSUMER_ADMIN = ("DELETE", "PAUSE", "LEADER.STEPDOWN", "UNPIN")


def operations(user: str) -> list[Probe]:
    """Every candidate operation for `user`: its controls (declared) and its probes (not)."""
    spec = catalog.spec(user)
    ops: list[Probe] = []

    def pub(subject: str, what: str, declared: bool) -> None:
        ops.append(Probe(user, PUBLISH, subject, what, declared))

    def sub(subject: str, what: str, declared: bool = False, queue: str = "") -> None:
        ops.append(Probe(user, SUBSCRIBE, subject, what, declared, queue=queue))

    # Readiness: every service asks for the account and each stream's info.
    pub("$JS.API.INFO", "account info (readiness)", True)
    for name in subjects.STREAM_SUBJECTS:
        pub(f"$JS.API.STREAM.INFO.{name}", "stream info (readiness)", True)

    for subject in data_subjects():
        pub(subject, "data subject", may_publish(spec, subject))
    pub(f"_INBOX.{WORD}", "reply into the default inbox", False)
    for other in USERS:
        pub(f"{inbox_prefix(other)}.{WORD}", f"reply into {other}'s inbox", False)

    written = set(spec.buckets_written())
    for bucket in buckets():
        pub(f"$KV.{bucket}.{WORD}", f"write bucket {bucket}", bucket in written)

    reads = readable(spec)
    for stream, inside in streams().items():
        can_read = stream in reads
        if stream.startswith("KV_"):  # every service reads the main streams' info (above)
            pub(f"$JS.API.STREAM.INFO.{stream}", "bucket info", can_read)
        pub(f"$JS.API.STREAM.MSG.GET.{stream}", "read a message", can_read)
        pub(f"$JS.API.DIRECT.GET.{stream}", "direct read", can_read)
        pub(f"$JS.API.DIRECT.GET.{stream}.{inside}", "direct read by subject", can_read)
        pub(f"$JS.API.STREAM.MSG.DELETE.{stream}", "delete a message", stream in spec.deletes)
        for op in _STREAM_ADMIN:
            pub(f"$JS.API.STREAM.{op}.{stream}", f"stream {op.lower()}", False)
        pub(f"$JS.API.STREAM.LEADER.STEPDOWN.{stream}", "stream leader step-down", False)
        pub(f"$JS.API.STREAM.PEER.REMOVE.{stream}", "stream peer remove", False)
        # Consumers nobody declares.
        pub(f"$JS.API.CONSUMER.CREATE.{stream}", "ephemeral consumer", False)
        pub(f"$JS.API.CONSUMER.CREATE.{stream}.{WORD}", "undeclared consumer", False)
        pub(f"$JS.API.CONSUMER.CREATE.{stream}.{WORD}.{inside}", "undeclared consumer", False)
        pub(f"$JS.API.CONSUMER.DURABLE.CREATE.{stream}.{WORD}", "undeclared durable", False)
        pub(f"$JS.API.CONSUMER.INFO.{stream}.{WORD}", "undeclared consumer info", False)
        pub(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{WORD}", "undeclared consumer next", False)
        pub(f"$JS.API.CONSUMER.NAMES.{stream}", "consumer names", False)
        pub(f"$JS.API.CONSUMER.LIST.{stream}", "consumer list", False)
    for api in ("STREAM.NAMES", "STREAM.LIST", "META.LEADER.STEPDOWN", "SERVER.REMOVE"):
        pub(f"$JS.API.{api}", api.lower(), False)
    pub("$JS.API.ACCOUNT.PURGE.$G", "account purge", False)
    pub("$SYS.REQ.SERVER.PING", "system request", False)

    for owner in ROLES:
        for c in owner.consumers:
            ops += _consumer_operations(user, owner.name, c)

    own = inbox_prefix(user)
    sub(f"{own}.{WORD}", "its own inbox", True)
    sub(f"{own}.>", "its own inbox", True)
    for subject in (">", "_INBOX.>", f"_INBOX.{WORD}"):
        sub(subject, "default inbox or everything")
    for other in USERS:
        if other != user:
            sub(f"{inbox_prefix(other)}.>", f"{other}'s replies")
    for filters in subjects.STREAM_SUBJECTS.values():
        for f in filters:
            sub(f, "a whole stream")
            sub(f, "a whole stream", queue=WORD)
    for subject in data_subjects():
        sub(subject, "data subject")
    for bucket in buckets():
        sub(f"$KV.{bucket}.>", f"bucket {bucket}")
    for subject in ("$JS.API.>", "$JS.ACK.>", "$JS.EVENT.>", "$SYS.>"):
        sub(subject, "broker internals")

    ops += _config_probes(spec)
    return ops


def _consumer_operations(user: str, owner: str, c: ConsumerSpec) -> list[Probe]:
    own = user == owner
    label = f"{owner}'s consumer {c.stream}/{c.durable}"
    api = "$JS.API.CONSUMER"
    ops = [
        Probe(user, PUBLISH, f"{api}.CREATE.{c.stream}.{c.durable}", f"create {label}", False),
        Probe(user, PUBLISH, f"{api}.INFO.{c.stream}.{c.durable}", f"info {label}", own),
        Probe(user, PUBLISH, f"{api}.MSG.NEXT.{c.stream}.{c.durable}", f"next {label}", own),
        Probe(user, PUBLISH, f"$JS.ACK.{c.stream}.{c.durable}.{_ACK_TAIL}", f"ack {label}", own),
        Probe(
            user,
            PUBLISH,
            f"{api}.DURABLE.CREATE.{c.stream}.{c.durable}",
            f"legacy create {label}",
            False,
        ),
        Probe(
            user,
            PUBLISH,
            f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{c.stream}.{c.durable}",
            f"forged advisory for {label}",
            False,
        ),
    ]
    for op in _CONSUMER_ADMIN:
        subject = f"{api}.{op}.{c.stream}.{c.durable}"
        ops.append(Probe(user, PUBLISH, subject, f"{op.lower()} {label}", False))
    for f in c.subjects:  # nobody but the admin creates a consumer, not even its owner
        subject = f"{api}.CREATE.{c.stream}.{c.durable}.{f}"
        ops.append(Probe(user, PUBLISH, subject, f"create {label} filtered", False))
    return ops


def _config_probes(spec: ServiceSpec) -> list[Probe]:
    """Requests on its own granted create subject with a config its declaration does not
    cover: another filter in the stream, or a push delivery to a subject it may not publish."""
    wildcards = {concrete(f) for filters in subjects.STREAM_SUBJECTS.values() for f in filters}
    families = sorted(data_subjects(), key=lambda s: s in wildcards)  # named families first
    ops = []
    for c in spec.consumers:
        subject = f"$JS.API.CONSUMER.CREATE.{c.stream}.{c.durable}"
        label = f"its consumer {c.stream}/{c.durable}"
        stream_filters = subjects.STREAM_SUBJECTS[c.stream]
        inside = [
            s for s in families if any(matches(f, s) for f in stream_filters) and not c.covers(s)
        ]
        if inside:
            config = {"filter_subject": inside[0]}
            ops.append(_config_probe(spec, c, subject, config, f"{label} reading {inside[0]}"))
        elsewhere = [
            s
            for s in families
            if not any(matches(f, s) for f in stream_filters) and not may_publish(spec, s)
        ]
        if elsewhere:
            config = {"deliver_subject": elsewhere[0], "filter_subject": c.subjects[0]}
            ops.append(
                _config_probe(spec, c, subject, config, f"{label} pushing to {elsewhere[0]}")
            )
    return ops


def _config_probe(
    spec: ServiceSpec, c: ConsumerSpec, subject: str, extra: dict[str, str], what: str
) -> Probe:
    config = {"durable_name": c.durable, "name": c.durable, "ack_policy": "explicit", **extra}
    payload = json.dumps({"stream_name": c.stream, "config": config}).encode()
    gap = "push" if "deliver_subject" in extra else "filter"
    return Probe(spec.name, REQUEST, subject, what, False, payload=payload, gap=gap)


def probes(user: str) -> list[Probe]:
    return [p for p in operations(user) if not p.declared]


def controls(user: str) -> list[Probe]:
    return [p for p in operations(user) if p.declared]
