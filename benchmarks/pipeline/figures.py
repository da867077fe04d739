"""The figures: latency percentiles, per-stage rates from the broker's own timestamps, and
CPU per event."""

from __future__ import annotations

import datetime as dt
from typing import Any

from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from shared.bus import Bus

from ..loadgen import percentile


def figures(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    if not ordered:
        return {"p50_ms": 0.0, "p95_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}
    return {
        "p50_ms": round(percentile(ordered, 50) * 1000, 1),
        "p95_ms": round(percentile(ordered, 95) * 1000, 1),
        "p99_ms": round(percentile(ordered, 99) * 1000, 1),
        "max_ms": round(ordered[-1] * 1000, 1),
    }


async def stamps(bus: Bus, stream: str, subject: str, since: dt.datetime) -> list[float]:
    """Broker timestamps (epoch seconds) of the messages on `subject` stored after `since`."""
    sub = await bus.js.pull_subscribe(
        subject,
        stream=stream,
        config=ConsumerConfig(
            deliver_policy=DeliverPolicy.BY_START_TIME,
            opt_start_time=since,
            ack_policy=AckPolicy.NONE,
            inactive_threshold=30.0,
        ),
    )
    found: list[float] = []
    try:
        while True:
            try:
                batch = await sub.fetch(1000, timeout=1.0)
            except TimeoutError:
                break
            found += [m.metadata.timestamp.timestamp() for m in batch]
            if len(batch) < 1000 and (await sub.consumer_info()).num_pending == 0:
                break
    finally:
        await sub.unsubscribe()
    return sorted(found)


def stage_rate(times: list[float]) -> dict[str, Any]:
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    return {
        "messages": len(times),
        "per_s": round((len(times) - 1) / span, 1) if span > 0 else None,
    }


def cpu_per(before: dict[str, float], after: dict[str, float], count: int) -> dict[str, float]:
    """Milliseconds of CPU per event (or decision) each process spent between two readings."""
    return {name: round((after[name] - before[name]) / count * 1000, 2) for name in before}
