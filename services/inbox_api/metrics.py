"""Inbox metrics: what waits for a reviewer, and what reviewers decide.

The waiting count and the oldest waiting item come from the database (every replica reports the
same numbers: aggregate them with `max`, never `sum`). A small task refreshes them every few
seconds off the event loop; the age is computed at scrape time from the oldest item's creation
time, so it keeps growing between refreshes and, if the database stops answering, errs towards
alerting. Decisions are counted where they are recorded, per process (aggregate with `sum`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, get_args

from prometheus_client import REGISTRY, Counter, Gauge
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from shared.helpdesk.base import Priority
from shared.inbox import (
    CATEGORIES,
    DECISION_TYPES,
    DRAFT_CONFIG,
    ESCALATION,
    NOTIFY_CONFIG,
    InterruptConfig,
)

if TYPE_CHECKING:
    from .store import Waiting

PRIORITIES: tuple[str, ...] = get_args(Priority)
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


NO_QUEUE = "none"  # the queue label of work no rule put in a queue
PAST_TARGET = Gauge(
    "desk_inbox_past_target_items",
    "Waiting inbox items past their service-level target, by queue (max across replicas).",
    ["queue"],
)


class OldestWaiting(Collector):
    """`desk_inbox_oldest_waiting_seconds{queue, priority}`: the age of the oldest waiting item
    of each queue and priority (0 where none waits; every known queue has its series)."""

    _labelnames = ("queue", "priority")  # as prometheus_client's own metrics name them

    def __init__(self) -> None:
        self.created: dict[tuple[str, str], float] = {}  # epoch seconds of each lane's oldest
        self.queues: set[str] = {NO_QUEUE}  # every queue seen or configured

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield self._family()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = self._family()
        at = time.time()
        for queue in sorted(self.queues):
            for priority in PRIORITIES:
                created = self.created.get((queue, priority))
                age = 0.0 if created is None else max(0.0, at - created)
                family.add_metric([queue, priority], age)
        yield family

    @staticmethod
    def _family() -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "desk_inbox_oldest_waiting_seconds",
            "Age of the oldest inbox item waiting for a reviewer, by queue and priority "
            "(0 where none waits).",
            labels=list(OldestWaiting._labelnames),
        )


OLDEST = OldestWaiting()
REGISTRY.register(OLDEST)


def known_queues(queues: Iterable[str]) -> None:
    """The configured queues: each has its series from the start, at 0."""
    OLDEST.queues.update(queues)
    for queue in OLDEST.queues:
        PAST_TARGET.labels(queue)


def record(waiting: Waiting) -> None:
    WAITING.set(waiting.count)
    OLDEST.created = {
        (queue or NO_QUEUE, priority or "normal"): stamp.timestamp()
        for (queue, priority), stamp in waiting.lanes.items()
        if stamp is not None
    }
    OLDEST.queues.update(q for q, _ in OLDEST.created)
    for queue in OLDEST.queues:
        PAST_TARGET.labels(queue).set(waiting.past.get(None if queue == NO_QUEUE else queue, 0))


async def refresh(read: Callable[[], Waiting]) -> None:
    """Read what waits in a thread and record it: the inbox's periodic work every
    REFRESH_SECONDS (a failed pass keeps the last values)."""
    record(await asyncio.to_thread(read))
