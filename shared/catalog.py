"""What each service needs, declared once; every grant and list is derived from this.

A `ServiceSpec` names a service's settings class, the durable consumers it owns (by name, with
their stream and filters), the subjects it publishes, the streams it may read message by message,
the key-value buckets it writes and reads, the database tables it owns, what it talks to outside
the broker, and its public HTTP port. From it come the NATS users (`shared.permissions`), the
per-writer ledger buckets (`shared.streams`), the database grants, the Kubernetes
NetworkPolicies, `desk up`'s supervisor list, the CLI's service commands and the fault suite's
list of processes to kill. Tests compare each of those with this declaration.

Three roles are not services of ours but get users from the same declaration: `subscriber` (an
outside system reading results), `ingress_imap` (the mail poller) and `shadow` (`desk shadow`,
which may read the events and nothing else).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from pydantic import BaseModel

from . import subjects
from .inbox import Audited, Decision, InboxItem, Notice, Overdue, Withdrawal
from .results import (
    ITEM_IGNORED,
    ITEM_WITHDRAWN,
    NOTIFY_FAILED,
    NOTIFY_SENT,
    REPLY_FAILED,
    REPLY_SENT,
    REPLY_WITHDRAWN,
    REPORT_DAILY,
)
from .settings import (
    DeskSettings,
    DrafterSettings,
    ImapSettings,
    InboxApiSettings,
    IngressSettings,
    ReconcilerSettings,
    RouterSettings,
    SenderSettings,
)

LEDGER = "ledger"  # every service's own processed-ledger bucket (see `ledger_bucket`)
STATE = "desk_state"  # the reconciler's cursors and last-run times
# the standing instructions the inbox learns (shared.standing); the bucket keeps its first name,
# under which deployments already hold the value
STANDING = "desk_guidance"
MODEL = "desk_model"  # the model endpoint's state as the drafter sees it (shared.outage)


def ledger_bucket(service: str) -> str:
    """The processed-ledger bucket `service` alone writes."""
    return f"desk_ledger_{subjects.token(service)}"


@dataclass(frozen=True)
class ConsumerSpec:
    """A durable pull consumer a service owns: only that service may create or read it."""

    durable: str
    stream: str
    subjects: tuple[str, ...]
    # what its envelopes' data must be: one model, or one per subject; None: the handler reads
    # the envelope itself
    payload: type[BaseModel] | Mapping[str, type[BaseModel]] | None = None

    def covers(self, subject: str) -> bool:
        return any(matches(f, subject) for f in self.subjects)


@dataclass(frozen=True)
class ServiceSpec:
    name: str
    settings: type[DeskSettings] | None
    consumers: tuple[ConsumerSpec, ...] = ()
    publishes: tuple[str, ...] = ()  # subjects (with wildcards) it may publish to
    reads: tuple[str, ...] = ()  # streams it may read message by message (no consumers)
    deletes: tuple[str, ...] = ()  # streams it may delete single messages from
    kv_writes: tuple[str, ...] = ()  # buckets it writes (LEDGER: its own ledger bucket)
    kv_reads: tuple[str, ...] = ()  # buckets it only reads (another service's ledger)
    tables: tuple[str, ...] = ()  # database tables it owns (its role's only grants)
    talks_to: tuple[str, ...] = ()  # outside the broker: "postgres", "helpdesk", "llm", …
    reached_by: tuple[str, ...] = ()  # who calls its public port: "internet", "reviewers"
    # the default port of its public HTTP routes, if it has any; None: no public server, only
    # the ops port (/healthz, /readyz, /metrics) every service has
    public_port: int | None = None
    port_setting: str | None = None  # the `desk up` setting (StackSettings) that chooses it
    # a part of another service run on its own (`desk <part_of> <part>`): the IMAP poller
    part_of: str | None = None
    part: str | None = None
    entry: str | None = None  # the module whose `run(settings)` runs it (services.<name>.main)
    dead_letters: bool = True  # it runs consumers, so it may write to `dlq.<name>`
    supervised: bool = True  # one of the services `desk up` starts

    @property
    def module(self) -> str:
        """The module whose `run(settings)` runs this service or part."""
        return self.entry or f"services.{self.name}.main"

    def consumer(self, durable: str) -> ConsumerSpec:
        for c in self.consumers:
            if c.durable == durable:
                return c
        raise KeyError(f"{self.name} declares no consumer {durable!r}")

    def buckets_written(self) -> tuple[str, ...]:
        return tuple(ledger_bucket(self.name) if b == LEDGER else b for b in self.kv_writes)

    def consumes(self, stream: str, subject: str) -> bool:
        return any(c.stream == stream and c.covers(subject) for c in self.consumers)


def matches(pattern: str, subject: str) -> bool:
    """NATS subject matching: `*` is one token, a final `>` one or more."""
    want, have = pattern.split("."), subject.split(".")
    for i, token in enumerate(want):
        if token == ">":
            return len(have) > i
        if i >= len(have) or (token != "*" and token != have[i]):
            return False
    return len(want) == len(have)


def _results(*kinds: str) -> tuple[str, ...]:
    return tuple(subjects.result(k) for k in kinds)


SENDER_RESULTS = _results(
    REPLY_SENT,
    REPLY_FAILED,
    REPLY_WITHDRAWN,
    ITEM_IGNORED,
    ITEM_WITHDRAWN,
    NOTIFY_SENT,
    NOTIFY_FAILED,
)
DRAFTER_PUBLISHES = (subjects.INBOX_ITEM, subjects.INBOX_WITHDRAWN, subjects.INBOX_OVERDUE)

INGRESS = ServiceSpec(
    name="ingress",
    settings=IngressSettings,
    publishes=("events.>",),
    kv_writes=(LEDGER,),  # replayed deliveries of sources without a timestamp
    reached_by=("internet",),
    public_port=8000,
    port_setting="ingress_port",
    dead_letters=False,
)
ROUTER = ServiceSpec(
    name="router",
    settings=RouterSettings,
    consumers=(ConsumerSpec("router", subjects.EVENTS, (subjects.events_of(),)),),
    publishes=("work.>",),
    kv_writes=(LEDGER,),  # `seen:` keys the reconciler compares the helpdesk with
)
DRAFTER = ServiceSpec(
    name="drafter",
    settings=DrafterSettings,
    consumers=(
        ConsumerSpec("drafter", subjects.WORK, (subjects.work_for("drafter"),)),
        ConsumerSpec("drafter-decisions", subjects.INBOX, (subjects.INBOX_DECISION,), Decision),
        ConsumerSpec("drafter-results", subjects.RESULTS, _results(REPLY_WITHDRAWN, REPLY_SENT)),
        # a person's audit of an auto-sent reply: a fine one becomes an example
        ConsumerSpec("drafter-audits", subjects.INBOX, (subjects.INBOX_AUDITED,), Audited),
    ),
    publishes=DRAFTER_PUBLISHES,
    kv_writes=(LEDGER, MODEL),  # MODEL: whether the model answers (the inbox's banner)
    kv_reads=(STANDING,),  # the standing instructions each draft is given
    tables=(
        "checkpoints",
        "checkpoint_blobs",
        "checkpoint_writes",
        "checkpoint_migrations",
        "store",  # what reviewers sent: the examples a draft is shown (services/drafter/memory)
        "store_migrations",
    ),
    talks_to=("postgres", "helpdesk", "llm"),
)
INBOX_API = ServiceSpec(
    name="inbox_api",
    settings=InboxApiSettings,
    consumers=(
        ConsumerSpec(
            "inbox_api",
            subjects.INBOX,
            DRAFTER_PUBLISHES,
            {
                subjects.INBOX_ITEM: InboxItem,
                subjects.INBOX_WITHDRAWN: Withdrawal,
                subjects.INBOX_OVERDUE: Overdue,
            },
        ),
        ConsumerSpec("inbox_api-results", subjects.RESULTS, SENDER_RESULTS),
    ),
    # Decisions, notices for the notifier, audits for the drafter; and a replayed dead letter
    # goes back to the subject it was stored on (filled in below: every subject some service
    # consumes).
    publishes=(subjects.INBOX_DECISION, subjects.INBOX_NOTICE, subjects.INBOX_AUDITED),
    reads=(subjects.DLQ, subjects.EVENTS, subjects.WORK, subjects.INBOX, subjects.RESULTS),
    deletes=(subjects.DLQ,),
    kv_writes=(STANDING,),
    kv_reads=(MODEL,),  # drafts delayed while the model is down: a banner for reviewers
    tables=(
        "inbox_items",
        "inbox_decisions",
        "inbox_notifications",
        "inbox_sessions",
        "inbox_instructions",
        "inbox_autosend",
        "inbox_claims",
        "inbox_claim_events",
        "inbox_notices",
    ),
    talks_to=("postgres",),
    reached_by=("reviewers",),
    public_port=8001,
    port_setting="inbox_api_port",
)
SENDER = ServiceSpec(
    name="sender",
    settings=SenderSettings,
    consumers=(
        ConsumerSpec(
            "sender-items",
            subjects.INBOX,
            (subjects.INBOX_ITEM, subjects.INBOX_WITHDRAWN),
            {subjects.INBOX_ITEM: InboxItem, subjects.INBOX_WITHDRAWN: Withdrawal},
        ),
        ConsumerSpec("sender", subjects.INBOX, (subjects.INBOX_DECISION,), Decision),
        ConsumerSpec("sender-notify", subjects.WORK, (subjects.work_for("notify"),)),
        # the inbox's escalations and digests, posted like supervisor notifications
        ConsumerSpec("sender-notices", subjects.INBOX, (subjects.INBOX_NOTICE,), Notice),
    ),
    publishes=SENDER_RESULTS,
    kv_writes=(LEDGER,),
    tables=(
        "sender_outbox",
        "sender_results",
        "sender_audit",
        "sender_items",
        "sender_notifications",
    ),
    talks_to=("postgres", "helpdesk", "channel", "notify"),
)
RECONCILER = ServiceSpec(
    name="reconciler",
    settings=ReconcilerSettings,
    publishes=("events.reconciler.>", subjects.result(REPORT_DAILY)),
    reads=(subjects.EVENTS, subjects.RESULTS, subjects.DLQ),  # the daily report's counts
    kv_writes=(LEDGER, STATE),
    kv_reads=(ledger_bucket("router"),),  # which tickets the router has seen
    talks_to=("helpdesk", "inbox_api", "notify"),
    dead_letters=False,
)

SERVICES: tuple[ServiceSpec, ...] = (INGRESS, ROUTER, DRAFTER, INBOX_API, SENDER, RECONCILER)

# Every subject some service consumes: where a replayed dead letter may go back to.
CONSUMED: tuple[str, ...] = tuple(
    dict.fromkeys(s for spec in SERVICES for c in spec.consumers for s in c.subjects)
)
INBOX_API = replace(INBOX_API, publishes=tuple(dict.fromkeys((*INBOX_API.publishes, *CONSUMED))))
SERVICES = (INGRESS, ROUTER, DRAFTER, INBOX_API, SENDER, RECONCILER)

SUBSCRIBER = ServiceSpec(
    name="subscriber",
    settings=None,
    consumers=(ConsumerSpec("subscriber", subjects.RESULTS, (subjects.ALL_RESULTS,)),),
    dead_letters=False,
    supervised=False,
)
IMAP_POLLER = ServiceSpec(
    name="ingress_imap",
    settings=ImapSettings,
    part_of="ingress",
    part="imap",
    entry="services.ingress.imap",
    publishes=("events.*.email.received",),
    talks_to=("imap",),
    dead_letters=False,
    supervised=False,
)

SHADOW = ServiceSpec(
    name="shadow",  # `desk shadow`: replays what arrived through a candidate drafter
    settings=None,
    reads=(subjects.EVENTS,),  # reads the record of what arrived; publishes nothing at all
    talks_to=("inbox_api", "llm"),
    dead_letters=False,
    supervised=False,
)

ROLES: tuple[ServiceSpec, ...] = (*SERVICES, SUBSCRIBER, IMAP_POLLER, SHADOW)
BY_NAME: dict[str, ServiceSpec] = {spec.name: spec for spec in ROLES}
SERVICE_NAMES: tuple[str, ...] = tuple(s.name for s in SERVICES)
SERVICE_SETTINGS: dict[str, type[DeskSettings]] = {
    s.name: s.settings for s in SERVICES if s.settings is not None
}
# the parts of a service run on their own, by service: `desk ingress imap`
PARTS: dict[str, dict[str, ServiceSpec]] = {}
for _role in ROLES:
    if _role.part_of is not None and _role.part is not None:
        PARTS.setdefault(_role.part_of, {})[_role.part] = _role
DURABLES: tuple[tuple[str, str], ...] = tuple(
    (c.stream, c.durable) for s in SERVICES for c in s.consumers
)  # (stream, durable) of every consumer our services own
BUCKETS: tuple[str, ...] = tuple(dict.fromkeys(b for s in ROLES for b in s.buckets_written()))


def spec(name: str) -> ServiceSpec:
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"no service or role named {name!r}") from None


def _check() -> None:
    """Consumer names are unique per stream; every stream named exists."""
    seen: set[tuple[str, str]] = set()
    for s in ROLES:
        for c in s.consumers:
            key = (c.stream, c.durable)
            assert key not in seen, f"two services declare consumer {key}"
            assert c.stream in subjects.STREAM_SUBJECTS, c
            seen.add(key)
        for stream in (*s.reads, *s.deletes):
            assert stream in subjects.STREAM_SUBJECTS, (s.name, stream)


_check()
