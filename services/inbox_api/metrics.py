"""Inbox metrics: what waits for a reviewer, and what reviewers decide.

The waiting count and the oldest waiting item come from the database (every replica reports the
same numbers: aggregate them with `max`, never `sum`). A small task refreshes them every few
seconds off the event loop; the age is computed at scrape time from the oldest item's creation
time, so it keeps growing between refreshes and, if the database stops answering, errs towards
alerting. Decisions are counted where they are recorded, per process (aggregate with `sum`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Callable, Iterator

from prometheus_client import REGISTRY, Counter, Gauge
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from shared.inbox import (
    CATEGORIES,
    DECISION_TYPES,
    DRAFT_CONFIG,
    ESCALATION,
    NOTIFY_CONFIG,
    InterruptConfig,
)

log = logging.getLogger(__name__)

REFRESH_SECONDS = 10.0

DECISIONS = Counter(
    "desk_inbox_decisions_total",
    "Decisions recorded, by item category and decision type (accept, edit, response, ignore).",
    ["category", "type"],
)
# every decision an item allows exists at 0 from the start (see shared.metrics)
_ALLOWED: dict[str, InterruptConfig] = {
    **dict.fromkeys(CATEGORIES, DRAFT_CONFIG),
    ESCALATION: NOTIFY_CONFIG,
}
for _category, _config in _ALLOWED.items():
    for _type in DECISION_TYPES:
        if _config.allows(_type):
            DECISIONS.labels(_category, _type)
WAITING = Gauge(
    "desk_inbox_waiting_items",
    "Inbox items waiting for a reviewer (from the database; max across replicas).",
)


class OldestWaiting(Collector):
    """`desk_inbox_oldest_waiting_seconds`: age of the oldest waiting item, 0 when none waits."""

    def __init__(self) -> None:
        self.created: float | None = None  # epoch seconds of the oldest waiting item

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield self._family()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        age = 0.0 if self.created is None else max(0.0, time.time() - self.created)
        yield self._family(age)

    @staticmethod
    def _family(age: float | None = None) -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "desk_inbox_oldest_waiting_seconds",
            "Age of the oldest inbox item waiting for a reviewer (0 when none waits).",
            value=age,
        )


OLDEST = OldestWaiting()
REGISTRY.register(OLDEST)


def record(count: int, oldest: dt.datetime | None) -> None:
    WAITING.set(count)
    OLDEST.created = None if oldest is None else oldest.timestamp()


async def refresh(read: Callable[[], tuple[int, dt.datetime | None]]) -> None:
    """Read (waiting count, oldest created_at) in a thread and record it: the inbox's periodic
    work every REFRESH_SECONDS (a failed pass keeps the last values)."""
    record(*await asyncio.to_thread(read))
