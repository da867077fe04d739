"""Ingress metrics. `source` labels only ever carry configured source names (or "unknown")."""

from __future__ import annotations

from collections.abc import Iterable
from typing import get_args

from prometheus_client import Counter, Histogram

from shared.signatures import Reason

REQUESTS = Counter(
    "desk_ingress_requests_total", "Webhook requests by source and outcome.", ["source", "outcome"]
)
SIGNATURE_FAILURES = Counter(
    "desk_ingress_signature_failures_total",
    "Requests refused for their signature, by reason.",
    ["source", "reason"],
)
DUPLICATES = Counter(
    "desk_ingress_duplicates_total", "Events the broker had already stored.", ["source"]
)
PUBLISH_SECONDS = Histogram(
    "desk_ingress_publish_seconds",
    "Time from publish to PubAck.",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
BODY_BYTES = Histogram(
    "desk_ingress_body_bytes",
    "Size of accepted request bodies.",
    buckets=(256, 1024, 4096, 16384, 65536, 262144, 1048576),
)

# `desk ingress imap`, the mail poller. Defined with the webhook's metrics, so both processes
# export them from the start (the webhook ingress at 0): a rule reading them always has series.
QUARANTINED = Counter(
    "desk_imap_quarantined_total",
    "Mails stored as a stand-in without their body, by reason.",
    ["reason"],
)
POLLS = Counter(
    "desk_imap_polls_total",
    "Polls of the mailbox, by outcome (failed: the mailbox or the broker refused; its mails "
    "wait for the next poll).",
    ["outcome"],
)
QUARANTINE_REASONS = ("too_large", "unreadable")
for _reason in QUARANTINE_REASONS:
    QUARANTINED.labels(_reason)
for _outcome in ("ok", "failed"):
    POLLS.labels(_outcome)

# Every status `app.receive` answers a configured source with; an unknown source gets 404.
STATUSES = (202, 400, 401, 408, 413, 415, 503)
UNKNOWN = "unknown"


def initialise(sources: Iterable[str]) -> None:
    """Every series the configured sources can produce exists at 0 from the start: a series
    born at its first event shows Prometheus no increase (the first 401 would go unseen)."""
    for source in sources:
        for status in STATUSES:
            REQUESTS.labels(source, str(status))
        for reason in get_args(Reason):
            SIGNATURE_FAILURES.labels(source, reason)
        DUPLICATES.labels(source)
    REQUESTS.labels(UNKNOWN, "404")
