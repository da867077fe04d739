"""Prometheus metrics shared by every service, defined once.

Every labelled series a process can produce is created at 0 as soon as its label values are
known (the consumer runtime, the bus and the ledger do it for these): a series born at its
first event shows Prometheus no increase, so `increase()` and `rate()` would miss that event.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

MESSAGES = Counter(
    "desk_messages_total",
    "Messages handled by a consumer, by outcome (acked, rejected, retried, dead_lettered).",
    ["service", "consumer", "outcome"],
)
HANDLER_SECONDS = Histogram(
    "desk_handler_seconds",
    "Time a handler took for one delivery.",
    ["service", "consumer"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
IN_FLIGHT = Gauge(
    "desk_in_flight",
    "Deliveries being handled right now.",
    ["service", "consumer"],
)
WAITING = Gauge(
    "desk_waiting",
    "Deliveries held by their handler until a dependency is back (database, open breaker).",
    ["service", "consumer"],
)
DEAD_LETTERS = Counter(
    "desk_dead_letters_total",
    "Messages written to the dead-letter stream, by reason.",
    ["service", "consumer", "reason"],
)
PUBLISHES = Counter(
    "desk_publishes_total",
    "JetStream publishes, by result (stored, duplicate, failed).",
    ["service", "result"],
)
PUBLISH_RESULTS = ("stored", "duplicate", "failed")
NATS_CONNECTED = Gauge("desk_nats_connected", "1 while the NATS connection is up.", ["service"])
LEDGER_CLAIMS = Counter(
    "desk_ledger_claims_total",
    "Processed-ledger claims, by result (first, seen).",
    ["service", "result"],
)
CLAIM_RESULTS = ("first", "seen")
