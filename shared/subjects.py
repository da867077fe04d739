"""Stream names and subject builders: the one place that spells them.

Subjects are `<prefix>.<tokens…>`; event types such as `ticket.created` become several tokens
(`events.helpdesk.ticket.created`), so consumers filter with `>`.
"""

from __future__ import annotations

import re

EVENTS = "EVENTS"
WORK = "WORK"
INBOX = "INBOX"
RESULTS = "RESULTS"
DLQ = "DLQ"

STREAM_SUBJECTS: dict[str, list[str]] = {
    EVENTS: ["events.>"],
    WORK: ["work.>"],
    INBOX: ["inbox.>"],
    RESULTS: ["results.>"],
    DLQ: ["dlq.>"],
}

# The broker's own record of each delivery's end: an ack (sampled on every consumer, see
# `shared.consumer`), a nak, a term. `desk trace` reads them to show each hop's attempts; no
# service reads or depends on them, so the stream is not among the ones readiness checks.
DELIVERIES = "DELIVERIES"
DELIVERY_RECORDS = [
    "$JS.EVENT.METRIC.CONSUMER.ACK.>",
    "$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.>",
    "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.>",
]

INBOX_ITEM = "inbox.item"
INBOX_DECISION = "inbox.decision"
INBOX_WITHDRAWN = "inbox.withdrawn"  # the drafter takes a waiting draft back
INBOX_OVERDUE = "inbox.overdue"  # the drafter marks a waiting draft overdue (stale scan)
INBOX_NOTICE = "inbox.notice"  # the inbox asks the notifier to post (escalations, digests)
INBOX_AUDITED = "inbox.audited"  # a person audited an auto-sent reply (the drafter learns)

_TOKEN = re.compile(r"^[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*$")


class SubjectError(ValueError):
    """A name that cannot be used as (part of) a NATS subject."""


def token(value: str) -> str:
    """Validate one or more dot-separated subject tokens (no spaces, wildcards or empty parts)."""
    if not _TOKEN.match(value):
        raise SubjectError(f"not a valid subject part: {value!r}")
    return value


def event(source: str, event_type: str) -> str:
    return f"events.{token(source)}.{token(event_type)}"


def events_of(source: str = "*") -> str:
    """Filter for every event of one source (or, by default, of all sources)."""
    return f"events.{source if source == '*' else token(source)}.>"


def work(target: str, event_type: str) -> str:
    return f"work.{token(target)}.{token(event_type)}"


def work_for(target: str) -> str:
    return f"work.{token(target)}.>"


def result(result_type: str) -> str:
    return f"results.{token(result_type)}"


def result_kind(subject: str) -> str:
    """`results.<kind…>` back to the kind (`reply.sent`); "" for any other subject."""
    prefix, _, kind = subject.partition(".")
    return kind if prefix == "results" else ""


def dlq(service: str) -> str:
    return f"dlq.{token(service)}"


ALL_DLQ = "dlq.>"
ALL_RESULTS = "results.>"


def parse_event(subject: str) -> tuple[str, str]:
    """`events.<source>.<type…>` back to (source, type)."""
    prefix, _, rest = subject.partition(".")
    source, _, event_type = rest.partition(".")
    if prefix != "events" or not source or not event_type:
        raise SubjectError(f"not an event subject: {subject!r}")
    return source, event_type
