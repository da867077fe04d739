"""The insider group: every NATS user tries what its declaration in `shared.catalog` does not
give it, on a real nats-server secured with `shared.permissions.authorization_block`.

    python -m chaos.badinput --only insiders

The probe list is derived from the catalog, never written out: for each service or role user
(`shared.permissions.USERS`),

- every other role's durable consumer: create (with and without its filters, and the legacy
  durable-create), info, next message, delete, pause, leader step-down, unpin, an ack, and a
  forged max-deliveries advisory; on its own consumers everything but create, info, next and
  ack; on every stream, consumers outside the catalog (ephemeral, a new name, names, list);
- every data subject (each stream, every subject some role publishes or consumes, each
  `dlq.<role>`, made concrete) its declared publishes do not cover; replies into the default
  inbox and into every user's inbox prefix;
- every key-value bucket it does not write (`$KV.<bucket>.<key>`); single-message reads
  (STREAM.MSG.GET, DIRECT.GET, and STREAM.INFO of a bucket) of the streams and buckets it does not
  read; STREAM.CREATE/UPDATE/DELETE/PURGE/SNAPSHOT/RESTORE/step-down/peer-remove of every stream
  and bucket, STREAM.MSG.DELETE where it declares no deletes, and the account-wide API;
- core subscriptions to `>`, the default inbox, other users' inbox prefixes, every stream's
  subjects (also as a queue group), every data subject, the JetStream API, acks, advisories,
  the buckets and `$SYS`.

Each probe is a core `publish` (or `subscribe`) and then a flush: the server answers a refused
one with `-ERR 'Permissions Violation for Publish to "<subject>"'` (or "for Subscription to")
before the PONG, and nats-py hands it to `error_cb` (lowercased) while it parses, before the
flush returns. nats-py 2.16's `flush()` however writes its PING straight to the socket, past a
PUB still waiting in the client's pending buffer (about 1 probe in 10 saw its PONG first), so
`settle` flushes twice: by the time the first PONG arrives the flusher task has written the
PUB, and the second PING follows it on the wire. A probe counts as accepted when no violation
naming its own subject was recorded; any other error is a stray and fails the group.

Every operation the declaration does give (its publishes, its consumers, its buckets, its reads
and deletes, its own inbox, and the readiness calls every service makes) is tried the same way
as a positive control and must not be refused, so the group cannot pass by refusing everything.

Subject permissions cannot see inside a request: a user that could create its own durable could
give it any filter in the stream, or a `deliver_subject` that turns it into a push consumer the
server delivers on. So only the admin creates consumers (`desk provision`), and these `config`
probes send such requests on each user's own create subject; an answer without an error counts
as accepted and fails the group.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import nats
import nats.errors as nats_errors
import nats.js.errors as js_errors
from nats.aio.client import Client

from shared import catalog, subjects
from shared.bus import NatsAuth, inbox_prefix
from shared.catalog import ROLES, ConsumerSpec, ServiceSpec, matches
from shared.permissions import ADMIN, USERS, authorization_block
from shared.streams import Topology, provision

from ..facts import log
from .tally import InsiderRun, InsiderTally

PUBLISH, SUBSCRIBE, REQUEST = "publish", "subscribe", "request"
WORD = "insider"  # the token that stands for a wildcard, a new name or a key
KNOWN_GAPS = {  # what the config probes try (all refused now that only the admin creates)
    "filter": "its own durable re-created with a filter outside its declared filters",
    "push": "its own durable re-created as a push consumer delivering to a subject it may "
    "not publish",
}
_ACK_TAIL = "1.1.1.1700000000000000000.0"  # delivered.stream_seq.consumer_seq.timestamp.pending
_STREAM_ADMIN = ("CREATE", "UPDATE", "DELETE", "PURGE", "SNAPSHOT", "RESTORE")
_CONSUMER_ADMIN = ("DELETE", "PAUSE", "LEADER.STEPDOWN", "UNPIN")


@dataclass(frozen=True)
class Probe:
    user: str
    kind: str  # PUBLISH, SUBSCRIBE or REQUEST
    subject: str
    what: str
    declared: bool  # a control (must be granted) or a probe (must be refused)
    queue: str = ""
    payload: bytes = b""
    gap: str = ""  # the KNOWN_GAPS entry a REQUEST probe tests

    def __str__(self) -> str:
        queue = f" (queue {self.queue})" if self.queue else ""
        return f"{self.user} {self.kind} {self.subject}{queue}: {self.what}"


# --- what exists, from the catalog ------------------------------------------------------


def concrete(pattern: str) -> str:
    """A subject the pattern matches: `*` and a final `>` become `insider` tokens."""
    tokens = [WORD if t == "*" else t for t in pattern.split(".")]
    if tokens[-1] == ">":
        tokens[-1:] = [WORD, "x"]
    return ".".join(tokens)


def data_subjects() -> tuple[str, ...]:
    """One concrete subject per data family: each stream's subjects, every subject a role
    publishes or consumes, and each role's dead letters."""
    patterns = [
        *(f for filters in subjects.STREAM_SUBJECTS.values() for f in filters),
        *(p for s in ROLES for p in s.publishes),
        *(f for s in ROLES for c in s.consumers for f in c.subjects),
        *(subjects.dlq(s.name) for s in ROLES),
    ]
    return tuple(dict.fromkeys(concrete(p) for p in patterns))


def buckets() -> tuple[str, ...]:
    return tuple(dict.fromkeys([*catalog.BUCKETS, *(b for s in ROLES for b in s.kv_reads)]))


def kv_stream(bucket: str) -> str:
    return f"KV_{bucket}"


def streams() -> dict[str, str]:
    """Every stream, with a concrete subject in it."""
    found = {name: concrete(filters[0]) for name, filters in subjects.STREAM_SUBJECTS.items()}
    found.update({kv_stream(b): f"$KV.{b}.{WORD}" for b in buckets()})
    return found


def may_publish(spec: ServiceSpec, subject: str) -> bool:
    """The declaration covers publishing `subject`: one of its publishes, or its dead letters."""
    if spec.dead_letters and subject == subjects.dlq(spec.name):
        return True
    return any(matches(p, subject) for p in spec.publishes)


def readable(spec: ServiceSpec) -> set[str]:
    """Streams it may read message by message: its reads, and the buckets it writes or reads."""
    return {
        *spec.reads,
        *(kv_stream(b) for b in spec.buckets_written()),
        *(kv_stream(b) for b in spec.kv_reads),
    }


def publishers() -> dict[str, list[str]]:
    """Data subject -> the users whose declaration lets them publish it."""
    return {s: [r.name for r in ROLES if may_publish(r, s)] for s in data_subjects()}


# --- every operation, marked declared or not --------------------------------------------


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


# --- trying them ------------------------------------------------------------------------


class Attempts:
    """One user's connection and the errors its `error_cb` has been handed."""

    def __init__(self, nc: Client, errors: list[str]) -> None:
        self.nc = nc
        self.errors = errors

    @classmethod
    async def connect(cls, url: str, user: str, password: str) -> Attempts:
        errors: list[str] = []

        async def record(exc: Exception) -> None:
            errors.append(str(exc))

        nc = await nats.connect(
            url,
            name=f"badinput-insider-{user}",
            error_cb=record,
            allow_reconnect=False,
            max_reconnect_attempts=0,
            **NatsAuth(user=user, password=password).options(user),
        )
        return cls(nc, errors)

    async def settle(self) -> None:
        """Everything sent so far has been processed by the server and any -ERR for it seen.
        Two flushes: nats-py's first PING may overtake a PUB still in its pending buffer."""
        await self.nc.flush(timeout=5)
        await self.nc.flush(timeout=5)

    async def attempt(self, probe: Probe) -> tuple[bool, list[str]]:
        """(refused, stray errors). Refused: a permissions violation naming this probe."""
        self.errors.clear()
        subscription = None
        answer: dict[str, object] = {}
        if probe.kind == PUBLISH:
            await self.nc.publish(probe.subject, probe.payload)
        elif probe.kind == SUBSCRIBE:
            subscription = await self.nc.subscribe(probe.subject, queue=probe.queue)
        else:  # a request: refused at once if the server says so, else wait for its answer
            inbox = self.nc.new_inbox()
            replies = await self.nc.subscribe(inbox, max_msgs=1)
            await self.nc.publish(probe.subject, probe.payload, reply=inbox)
            await self.settle()
            if not any(_violation(probe) in e for e in self.errors):
                try:
                    reply = await replies.next_msg(timeout=2)
                    answer = json.loads(reply.data)
                except (TimeoutError, nats_errors.Error, ValueError) as exc:
                    answer = {"error": f"no answer ({exc.__class__.__name__})"}
            with contextlib.suppress(nats_errors.Error):
                await replies.unsubscribe()
        await self.settle()
        if subscription is not None:
            await subscription.unsubscribe()
            await self.settle()
        mine = _violation(probe)
        refused = any(mine in e for e in self.errors)
        strays = [e for e in self.errors if mine not in e]
        self.errors.clear()
        if probe.kind == REQUEST and answer.get("error"):
            refused = True
        return refused, strays


def _violation(probe: Probe) -> str:
    """The text nats-py's error_cb gets (lowercased) when the server refuses `probe`."""
    subject = json.dumps(probe.subject)  # Go's %q, for the subjects we use
    if probe.kind == SUBSCRIBE:
        text = f"permissions violation for subscription to {subject}"
        if probe.queue:
            text += f" using queue {json.dumps(probe.queue)}"
    else:
        text = f"permissions violation for publish to {subject}"
    return text.lower()


async def probe_user(url: str, user: str, password: str, admin: Client) -> InsiderTally:
    """Try each of `user`'s operations; `admin` removes the consumer a config probe is about
    first, so each config meets a consumer that does not exist yet."""
    tally = InsiderTally(user)
    conn = await Attempts.connect(url, user, password)
    js = admin.jetstream()
    try:
        for probe in operations(user):
            if probe.kind == REQUEST:
                stream, durable = probe.subject.split(".")[-2:]
                with contextlib.suppress(js_errors.NotFoundError):
                    await js.delete_consumer(stream, durable)
            refused, strays = await conn.attempt(probe)
            tally.strays += [f"{probe}: {e}" for e in strays]
            if probe.declared:
                tally.controls += 1
                if refused:
                    tally.controls_refused.append(str(probe))
            elif probe.kind == REQUEST:
                tally.configs += 1
                if not refused:
                    tally.configs_accepted.append(str(probe))
            else:
                tally.probes += 1
                if refused:
                    tally.refused += 1
                else:
                    tally.accepted.append(str(probe))
        await conn.settle()
        await asyncio.sleep(0.05)  # a late -ERR would show up now
        tally.strays += [f"{user} after the last probe: {e}" for e in conn.errors]
        if not conn.nc.is_connected:
            tally.strays.append(f"{user}: the connection closed during the probes")
    finally:
        await conn.nc.close()
    return tally


async def probe_server(
    url: str, passwords: dict[str, str], users: Sequence[str] = USERS
) -> InsiderRun:
    """Provision as admin, then try each user's operations on the server at `url`."""
    started = time.monotonic()
    admin = await nats.connect(url, user=ADMIN, password=passwords[ADMIN], allow_reconnect=False)
    run = InsiderRun(publishers=publishers())
    try:
        await provision(admin.jetstream(), Topology())
        for user in users:
            run.users.append(await probe_user(url, user, passwords[user], admin))
    finally:
        await admin.close()
    run.seconds = time.monotonic() - started
    return run


def run_insiders(var: Path, users: Sequence[str] = USERS) -> InsiderRun:
    """The insider group on its own nats-server (store under `var`), with a user for every
    service and role and `admin`, probing `users` (all by default); the server is killed
    afterwards."""
    from desk.natsserver import NatsServer

    passwords = {user: secrets.token_urlsafe(24) for user in (ADMIN, *USERS)}
    server = NatsServer(
        var / "nats",
        sync_always=False,
        log_file=var / "nats-server.log",
        authorization=authorization_block(passwords),
    )
    started = time.monotonic()
    try:
        server.start()
        run = asyncio.run(probe_server(server.url, passwords, users))
    except Exception as exc:
        log(f"insider group error: {exc.__class__.__name__}: {exc}")
        return InsiderRun(error=f"{exc.__class__.__name__}: {exc}")
    finally:
        server.kill()
    run.seconds = time.monotonic() - started
    return run
