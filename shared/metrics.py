"""Prometheus metrics shared by every service, defined once."""

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
NATS_CONNECTED = Gauge("desk_nats_connected", "1 while the NATS connection is up.", ["service"])
LEDGER_CLAIMS = Counter(
    "desk_ledger_claims_total",
    "Processed-ledger claims, by result (first, seen).",
    ["service", "result"],
)
