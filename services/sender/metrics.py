"""The sender's counters: decisions by outcome, and channel delivery attempts."""

from __future__ import annotations

from prometheus_client import Counter

OUTCOMES = Counter(
    "desk_sender_outcomes_total",
    "Decisions handled by the sender, by outcome.",
    ["outcome"],
)
DELIVERIES = Counter(
    "desk_sender_deliveries_total",
    "Channel delivery attempts, by channel and outcome.",
    ["channel", "outcome"],
)
OUTCOME_NAMES = (
    "written",
    "already_sent",
    "sent",
    "failed",
    "withdrawn",
    "superseded",
    "ignored",
    "item_withdrawn",
)
DELIVERY_OUTCOMES = ("delivered", "failed", "retry", "unknown", "wait")
for _name in OUTCOME_NAMES:  # every series exists at 0 from the start (see shared.consumer)
    OUTCOMES.labels(_name)
