"""Stream, consumer and bucket provisioning: idempotent, so running it twice changes nothing.

Create, and on "already in use with a different configuration" update in place.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import nats.errors as nats_errors
import nats.js.errors as js_errors
from nats.js import JetStreamContext
from nats.js.api import (
    ConsumerConfig,
    DiscardPolicy,
    KeyValueConfig,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)

from . import catalog, subjects
from .bus import BrokerCode

log = logging.getLogger(__name__)

DAY = 24 * 3600.0

# How long each stream keeps messages. EVENTS is the system of record for what arrived.
RETENTION: dict[str, float] = {
    subjects.EVENTS: 90 * DAY,
    subjects.WORK: 14 * DAY,
    subjects.INBOX: 90 * DAY,
    subjects.RESULTS: 30 * DAY,
    subjects.DLQ: 90 * DAY,
    subjects.DELIVERIES: 7 * DAY,
}
# The delivery records live in memory (nothing is written to disk for them, and a broker's
# restart forgets them), within this many bytes: about 3 KB per event, so the last ~10,000.
# JetStream reserves it on each replica: the broker's max_memory_store must leave room for it.
DELIVERIES_BYTES = 32 * 1024 * 1024

# One processed-ledger bucket per writer, and the reconciler's state (see `shared.catalog`).
BUCKETS = catalog.BUCKETS

Change = Literal["created", "updated", "unchanged", "migrated"]


@dataclass(frozen=True)
class Topology:
    replicas: int = 1
    duplicate_window: float = 600.0

    def streams(self) -> list[StreamConfig]:
        return [
            StreamConfig(
                name=name,
                subjects=list(subject_filters),
                retention=RetentionPolicy.LIMITS,
                storage=StorageType.FILE,
                discard=DiscardPolicy.OLD,
                num_replicas=self.replicas,
                duplicate_window=self.duplicate_window,
                max_age=RETENTION[name],
            )
            for name, subject_filters in subjects.STREAM_SUBJECTS.items()
        ] + [
            StreamConfig(
                name=subjects.DELIVERIES,
                subjects=list(subjects.DELIVERY_RECORDS),
                retention=RetentionPolicy.LIMITS,
                storage=StorageType.MEMORY,
                discard=DiscardPolicy.OLD,
                num_replicas=self.replicas,
                max_age=RETENTION[subjects.DELIVERIES],
                max_bytes=DELIVERIES_BYTES,
            )
        ]

    def buckets(self) -> list[KeyValueConfig]:
        return [
            KeyValueConfig(bucket=name, history=1, storage=StorageType.FILE, replicas=self.replicas)
            for name in BUCKETS
        ]


async def ensure_stream(js: JetStreamContext, config: StreamConfig) -> Change:
    assert config.name
    try:
        before = await js.stream_info(config.name)
    except js_errors.NotFoundError:
        before = None
    try:
        after = await js.add_stream(config)
    except js_errors.BadRequestError as exc:
        if exc.err_code != BrokerCode.STREAM_NAME_IN_USE:
            raise
        after = await js.update_stream(config)
    if before is None:
        return "created"
    return "unchanged" if before.config == after.config else "updated"


async def ensure_bucket(js: JetStreamContext, config: KeyValueConfig) -> Change:
    try:
        await js.key_value(config.bucket)
        return "unchanged"
    except js_errors.BucketNotFoundError:
        pass
    try:
        await js.create_key_value(config)
    except js_errors.BadRequestError as exc:
        if exc.err_code != BrokerCode.STREAM_NAME_IN_USE:
            raise
        return "unchanged"  # another replica created it a moment ago
    return "created"


async def ensure_consumer(js: JetStreamContext, stream: str, config: ConsumerConfig) -> None:
    """Create the durable consumer, or update it to `config` (the server treats both alike)."""
    await js.add_consumer(stream, config)


async def _ensure_consumer_change(
    js: JetStreamContext, stream: str, config: ConsumerConfig
) -> Change:
    assert config.durable_name
    try:
        before = await js.consumer_info(stream, config.durable_name)
    except js_errors.NotFoundError:
        before = None
    await ensure_consumer(js, stream, config)
    if before is None:
        return "created"
    after = await js.consumer_info(stream, config.durable_name)
    return "unchanged" if before.config == after.config else "updated"


# JetStream is up but cannot answer yet: a cluster still electing its leaders, a restart.
NOT_READY = (TimeoutError, nats_errors.NoRespondersError, js_errors.ServiceUnavailableError)


async def provision(
    js: JetStreamContext,
    topology: Topology,
    *,
    patience: float = 60.0,
    consumers: Sequence[tuple[str, ConsumerConfig]] = (),
    adopt_shared_ledger: bool = False,
) -> dict[str, Change]:
    """Make every stream and bucket (and the given consumers) exist as configured; report
    what changed. Services with their own NATS users cannot create consumers, so an admin
    provisions them (`shared.consumer.declared_consumers`), and moves what a ledger bucket
    shared by every service held into each service's own (`adopt_shared_ledger`, once).

    While JetStream is not ready (see `NOT_READY`) each step is tried again, for up to
    `patience` seconds in all; any other error is raised at once.
    """
    deadline = time.monotonic() + patience
    changes: dict[str, Change] = {}
    for stream in topology.streams():
        assert stream.name
        changes[stream.name] = await _patiently(deadline, ensure_stream, js, stream)
    for bucket in topology.buckets():
        changes[f"KV_{bucket.bucket}"] = await _patiently(deadline, ensure_bucket, js, bucket)
    for stream_name, config in consumers:
        changes[f"{stream_name}/{config.durable_name}"] = await _patiently(
            deadline, _ensure_consumer_change, js, stream_name, config
        )
    if adopt_shared_ledger:
        from .ledger import SHARED_BUCKET, adopt_shared_bucket

        copied = await adopt_shared_bucket(js)
        if copied is not None:
            log.info("moved %d keys of %s into the services' own ledgers", copied, SHARED_BUCKET)
            changes[f"KV_{SHARED_BUCKET}"] = "migrated"
    changed = {k: v for k, v in changes.items() if v != "unchanged"}
    if changed:
        log.info("provisioned %s", ", ".join(f"{k} {v}" for k, v in changed.items()))
    return changes


async def _patiently(deadline: float, step: Any, *args: Any) -> Change:
    while True:
        try:
            change: Change = await step(*args)
            return change
        except NOT_READY as exc:
            if time.monotonic() >= deadline:
                raise
            log.warning("JetStream not ready (%s); provisioning again", exc.__class__.__name__)
            await asyncio.sleep(1.0)


async def missing_streams(js: JetStreamContext) -> list[str]:
    """Streams the system needs that the broker does not have (for /readyz)."""
    missing = []
    for name in subjects.STREAM_SUBJECTS:
        try:
            await js.stream_info(name)
        except js_errors.NotFoundError:
            missing.append(name)
    return missing
