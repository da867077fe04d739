"""The runtime loop: fetch a consumer's deliveries, run its handler, map the outcome."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import nats.errors as nats_errors
from nats.aio.msg import Msg

from .. import db, ids, metrics, subjects, telemetry, trace
from .. import headers as h
from .. import logging as desk_logging
from ..bus import Bus
from ..errors import BusinessReject, PermanentError, TransientError, Unavailable
from ..streams import ensure_consumer
from .deadletter import DEAD_LETTER_REASONS, describe, letter_headers
from .declaration import Consumer, Delivery
from .provisioning import await_provisioned

log = logging.getLogger(__package__)  # "shared.consumer": one logger for the whole runtime

# Waiting for a dependency backs off like a retry, but only this many steps: the next try
# stays within a few seconds of the dependency's return (or of its Retry-After).
WAIT_STEPS = 4
OUTCOMES = ("acked", "rejected", "retried", "handed_back", "dead_lettered")


class ConsumerRuntime:
    """Runs one `Consumer` inside one service process."""

    def __init__(
        self,
        bus: Bus,
        service: str,
        consumer: Consumer,
        fetch_timeout: float = 0.25,
        *,
        create: bool = True,
    ):
        self.bus = bus
        self.service = service
        self.consumer = consumer
        self.create = create  # False: an admin provisions it (`declared_consumers`); only bind
        # How long one pull waits for messages. A stop waits for the pull under way rather
        # than abandon it (a message the broker sent to an abandoned pull would wait out its
        # ack_wait): short, so a stop is quick; an idle consumer asks four times a second.
        self.fetch_timeout = fetch_timeout
        self._slots = asyncio.Semaphore(consumer.concurrency)
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._sub: Any = None
        labels = (service, consumer.name)
        self._in_flight = metrics.IN_FLIGHT.labels(*labels)
        self._seconds = metrics.HANDLER_SECONDS.labels(*labels)
        self._waiting = metrics.WAITING.labels(*labels)
        # Every series this consumer can produce exists from the start at 0: a counter that
        # appears only at its first event makes `increase()` miss that event (a dashboard's
        # "dead letters (24h)" read 0 while two existed).
        for reason in DEAD_LETTER_REASONS:
            metrics.DEAD_LETTERS.labels(*labels, reason)
        for outcome in OUTCOMES:
            metrics.MESSAGES.labels(*labels, outcome)

    async def start(self) -> None:
        if self.create:
            await ensure_consumer(self.bus.js, self.consumer.stream, self.consumer.config())
        else:
            await await_provisioned(self.bus, self.consumer)
        self._sub = await self.bus.js.pull_subscribe_bind(
            self.consumer.name, stream=self.consumer.stream
        )
        self._loop_task = asyncio.create_task(
            self._fetch_loop(), name=f"fetch:{self.consumer.name}"
        )

    async def stop(self, timeout: float) -> None:
        """Stop fetching, let in-flight handlers finish for up to `timeout`, hand back the rest."""
        self._stopping.set()
        if self._loop_task is not None:
            await self._loop_task  # returns within fetch_timeout: a pending pull is never abandoned
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=timeout)
            for task in pending:
                task.cancel()  # the handler's message is nak'ed for immediate redelivery
            if pending:
                log.warning("drain: %d deliveries handed back unfinished", len(pending))
                await asyncio.wait(pending, timeout=2)
        if self._sub is not None:
            try:
                await self._sub.unsubscribe()
            except (TimeoutError, nats_errors.Error):
                pass

    @property
    def idle(self) -> bool:
        return not self._tasks

    async def _fetch_loop(self) -> None:
        c = self.consumer
        while not self._stopping.is_set():
            await self._slots.acquire()
            if self._stopping.is_set():  # a handler finished after the stop: pull no more
                self._slots.release()
                break
            wanted = 1
            while wanted < c.batch and not self._slots.locked():
                await self._slots.acquire()
                wanted += 1
            try:
                msgs = await self._sub.fetch(wanted, timeout=self.fetch_timeout)
            except TimeoutError:
                msgs = []
            except (nats_errors.Error, OSError) as exc:
                msgs = []
                if not self._stopping.is_set():
                    log.warning("fetch failed (%s); retrying", exc.__class__.__name__)
                    await asyncio.sleep(0.5)
            for _ in range(wanted - len(msgs)):
                self._slots.release()
            for msg in msgs:
                task = asyncio.create_task(self._process(msg))
                self._tasks.add(task)
                task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._slots.release()
        if not task.cancelled() and task.exception() is not None:
            log.error("runtime error", exc_info=task.exception())

    async def _process(self, msg: Msg) -> None:
        c = self.consumer
        meta = msg.metadata
        attempt = meta.num_delivered
        headers = dict(msg.headers or {})
        # A replayed dead letter keeps its original id, so dedup ids derived from it still match.
        msg_id = headers.get(h.ORIGINAL_MSG_ID) or headers.get(h.MSG_ID)
        # each delivery is a span of the trace its message names (shared.telemetry), current
        # while it is handled: logs carry it, and every message published meanwhile continues it
        parent = trace.of(headers)
        with (
            desk_logging.bound(msg_id, headers.get(h.CORRELATION_ID)),
            # a message that names no trace (not one of ours) is handled outside any
            contextlib.nullcontext()
            if parent is None
            else telemetry.span(
                f"process {msg.subject}",
                "consumer",
                parent=parent,
                attributes={
                    "messaging.system": "nats",
                    "messaging.operation.type": "process",
                    "messaging.destination.name": msg.subject,
                    "messaging.consumer.group.name": c.name,
                    "messaging.message.id": msg_id or "",
                    "desk.service": self.service,
                    "desk.stream": meta.stream,
                    "desk.stream_seq": meta.sequence.stream,
                    "desk.attempt": attempt,
                },
            ),
        ):
            if attempt > c.max_deliver:
                await self._dead_letter(
                    msg, "retries_exhausted", "the last allowed attempt did not finish"
                )
                return
            try:
                body = c.decode(msg.data, headers)
            except Exception as exc:  # any decoder failure means the bytes are unusable
                await self._dead_letter(msg, "undecodable", describe(exc))
                return
            try:
                payload = c.read_payload(msg.subject, body)
            except PermanentError as exc:
                await self._dead_letter(msg, "permanent", describe(exc))
                return
            delivery = Delivery(
                subject=msg.subject,
                body=body,
                headers=headers,
                msg_id=msg_id,
                attempt=attempt,
                stream_seq=meta.sequence.stream,
                data=msg.data,
                stored_at=meta.timestamp,
                payload=payload,
            )
            await self._run_handler(msg, delivery)

    async def _run_handler(self, msg: Msg, delivery: Delivery[Any]) -> None:
        c = self.consumer
        heartbeat = asyncio.create_task(self._heartbeat(msg))
        started = time.monotonic()
        self._in_flight.inc()
        try:
            waits = 0
            while True:  # once, or again in place while a dependency is down
                try:
                    await c.handler(delivery)
                except Unavailable as exc:
                    down: BaseException = exc
                    retry_after = exc.retry_after
                except BusinessReject as exc:
                    log.info("rejected: %s", exc, extra={"outcome": exc.outcome})
                    await self._settle(msg, "ack", "rejected")
                    return
                except PermanentError as exc:
                    await self._dead_letter(msg, "permanent", describe(exc))
                    return
                except TransientError as exc:
                    await self._retry(msg, delivery.attempt, exc, exc.retry_after)
                    return
                except asyncio.CancelledError:
                    await self._settle(msg, "nak", "handed_back")
                    raise
                except Exception as exc:
                    if not db.is_outage(exc):
                        log.exception("handler failed unexpectedly; retrying")
                        await self._retry(msg, delivery.attempt, exc, None)
                        return
                    down, retry_after = exc, None  # the database is unreachable: wait for it
                else:
                    await self._settle(msg, "ack", "acked")
                    return
                waits += 1
                if not await self._wait(down, waits, retry_after, started):
                    await self._settle(msg, "nak", "handed_back")  # stopping: another replica
                    return
        finally:
            heartbeat.cancel()
            self._in_flight.dec()
            self._seconds.observe(time.monotonic() - started)

    async def _wait(
        self, down: BaseException, waits: int, retry_after: float | None, since: float
    ) -> bool:
        """Hold the delivery until it is worth trying again; False if the service is stopping.

        Waiting spends no attempt (the broker counts deliveries, and a nak is one): however
        long the outage, the work is done once the dependency is back, never dead-lettered.
        The delivery stays in progress (heartbeats) and holds its concurrency slot, so the
        consumer fetches nothing new while everything it holds is waiting."""
        delay = self.consumer.retry.delay(min(waits, WAIT_STEPS), retry_after=retry_after)
        text = describe(down)
        if waits == 1 or waits % 20 == 0:
            log.warning(
                "waiting for a dependency (%s) for %.0fs so far; next try in %.1fs",
                text,
                time.monotonic() - since,
                delay,
            )
        self._waiting.inc()
        try:
            await asyncio.wait_for(self._stopping.wait(), timeout=delay)
        except TimeoutError:
            return True
        finally:
            self._waiting.dec()
        return False

    async def _retry(
        self, msg: Msg, attempt: int, exc: BaseException, retry_after: float | None
    ) -> None:
        c = self.consumer
        if attempt >= c.max_deliver:
            await self._dead_letter(msg, "retries_exhausted", describe(exc))
            return
        delay = c.retry.delay(attempt, retry_after=retry_after)
        _failed(describe(exc))
        log.info("attempt %d failed (%s); retry in %.2fs", attempt, describe(exc), delay)
        await self._settle(msg, "nak", "retried", delay=delay)

    async def _heartbeat(self, msg: Msg) -> None:
        interval = max(self.consumer.ack_wait / 3, 0.1)
        while True:
            await asyncio.sleep(interval)
            try:
                await msg.in_progress()
            except (nats_errors.Error, OSError):
                pass  # the broker is away; keep going, a long wait outlives a reconnect

    async def _dead_letter(self, msg: Msg, reason: str, error: str) -> None:
        """One DLQ message (original payload and headers, error, attempts), then term."""
        c = self.consumer
        meta = msg.metadata
        hdrs = letter_headers(msg, self.service, c.name, reason, error)
        try:
            await self.bus.publish(
                subjects.dlq(self.service),
                msg.data,
                msg_id=ids.dead_letter(meta.stream, meta.sequence.stream),
                headers=hdrs,
            )
        except (TransientError, PermanentError) as exc:
            # Not written: keep the message and try again later rather than lose it.
            log.error("dead letter not written (%s); will retry", exc)
            await self._settle(msg, "nak", "retried", delay=c.retry.maximum)
            return
        _failed(f"{reason}: {error}")
        log.warning("dead-lettered (%s): %s", reason, error)
        metrics.DEAD_LETTERS.labels(self.service, c.name, reason).inc()
        await self._settle(msg, "term", "dead_lettered")

    async def _settle(
        self, msg: Msg, action: str, outcome: str, delay: float | None = None
    ) -> None:
        try:
            if action == "ack":
                await msg.ack()
            elif action == "nak":
                await msg.nak(delay=delay)
            else:
                await msg.term()
        except (nats_errors.Error, OSError) as exc:
            # The broker will redeliver after ack_wait; handlers are idempotent.
            log.warning("%s not sent (%s)", action, exc.__class__.__name__)
        metrics.MESSAGES.labels(self.service, self.consumer.name, outcome).inc()
        work = telemetry.current()
        if work is not None:
            work.attributes["desk.outcome"] = outcome


def _failed(error: str) -> None:
    work = telemetry.current()
    if work is not None:
        work.fail(error)
