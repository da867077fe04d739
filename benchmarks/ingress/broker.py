"""The broker references: streams configured like EVENTS under other names, and one nats-py
client publishing the workload's messages to them with many publishes in flight."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from nats.js import JetStreamContext
from nats.js.api import StreamConfig

from shared import subjects
from shared.streams import Topology

from .workload import Message

BROKER_IN_FLIGHT = 4000  # nats-py's own default window for publish_async
BENCH_STREAM = "BENCH_EVENTS"
PUBLISH_STREAM = "BENCH_PUBLISHED"  # what the publishing endpoint stores (benchmarks.bare)
SAME_STREAM = "BENCH_SAME_IN_FLIGHT"  # the second broker reference: its own stream and ids


def bench_stream(name: str = BENCH_STREAM, prefix: str = "bench") -> StreamConfig:
    """EVENTS' configuration under another name and subject space."""
    [events] = [s for s in Topology().streams() if s.name == subjects.EVENTS]
    return dataclasses.replace(events, name=name, subjects=[f"{prefix}.>"])


def renamed(messages: list[Message], prefix: str) -> list[Message]:
    """The same messages on `prefix.…` subjects (for the second broker reference's stream)."""
    return [
        dataclasses.replace(m, subject=prefix + m.subject[m.subject.index(".") :]) for m in messages
    ]


async def publish_all(js: JetStreamContext, messages: list[Message]) -> list[Any]:
    futures = [await js.publish_async(m.subject, m.body, headers=dict(m.headers)) for m in messages]
    return list(await asyncio.gather(*futures))


async def stream_messages(js: JetStreamContext, stream: str) -> int:
    return int((await js.stream_info(stream)).state.messages)
