"""The consumer runtime: the only code that acks, naks or terminates a message.

A consumer is declared as data (`Consumer`); the runtime fetches batches from its durable pull
consumer, runs the handler with bounded concurrency, and maps the outcome:

| handler outcome            | runtime action                                            |
|----------------------------|-----------------------------------------------------------|
| returns                    | ack                                                       |
| `BusinessReject`           | ack, counted as rejected, never retried                   |
| `TransientError` (or a bug)| nak with the retry policy's delay; on the last allowed    |
|                            | delivery: dead letter, then term                          |
| `Unavailable`, or the      | hold the message (in-progress heartbeats) and run the     |
| database unreachable       | handler again after the backoff or Retry-After: no        |
|                            | attempt spent, never dead-lettered; handed back on stop   |
| `PermanentError`           | dead letter, then term, on the first attempt              |
| undecodable bytes          | dead letter, then term; the handler is never called       |

The runtime dead-letters by itself on the last allowed delivery: the broker's max-deliveries
advisory carries no body and arrives late. The broker's own `max_deliver` is one higher than the
consumer's, so a delivery whose worker died on the last attempt still comes back once, and is
dead-lettered instead of vanishing.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import nats.errors as nats_errors
import nats.js.errors as js_errors
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from pydantic import BaseModel, ValidationError

from . import catalog, db, envelope, ids, metrics, subjects, telemetry, trace
from . import headers as h
from . import logging as desk_logging
from .bus import Bus
from .catalog import ConsumerSpec
from .errors import BusinessReject, PermanentError, TransientError, Unavailable, first_error
from .retry import RetryPolicy
from .streams import ensure_consumer

log = logging.getLogger(__name__)

T = TypeVar("T")
Decoder = Callable[[bytes, Mapping[str, str]], Any]


@dataclass(frozen=True)
class Delivery(Generic[T]):
    """What a handler receives: the decoded body and the facts about this delivery."""

    subject: str
    body: T
    headers: Mapping[str, str]
    msg_id: str | None
    attempt: int
    stream_seq: int
    data: bytes
    stored_at: dt.datetime
    payload: Any = None  # the body's data as the consumer's declared model (`Consumer.payload`)


Handler = Callable[[Delivery[Any]], Awaitable[None]]


@dataclass(frozen=True)
class Consumer:
    """A durable pull consumer and how its messages are handled."""

    name: str
    stream: str
    subjects: tuple[str, ...]
    handler: Handler
    decode: Decoder = envelope.decode
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_deliver: int = 5
    ack_wait: float = 30.0
    concurrency: int = 8
    batch: int = 16
    max_ack_pending: int = 1000
    # what the envelope's data must be: one model, or one per subject (a consumer of several
    # kinds); validated once here, so a handler receives `delivery.payload` typed, and data
    # that is not that model is dead-lettered before any handler runs
    payload: type[BaseModel] | Mapping[str, type[BaseModel]] | None = None

    @classmethod
    def of(cls, declared: ConsumerSpec, handler: Handler, **options: Any) -> Consumer:
        """The consumer a service declares in `shared.catalog`, handled by `handler`."""
        options.setdefault("payload", declared.payload)
        return cls(
            name=declared.durable,
            stream=declared.stream,
            subjects=declared.subjects,
            handler=handler,
            **options,
        )

    def __post_init__(self) -> None:
        if not self.subjects:
            raise ValueError("a consumer needs at least one subject filter")
        if self.max_deliver < 1 or self.concurrency < 1 or self.batch < 1:
            raise ValueError("max_deliver, concurrency and batch must be at least 1")

    def read_payload(self, subject: str, body: Any) -> Any:
        """`body`'s data as the declared model; `PermanentError` if it is not one."""
        if self.payload is None:
            return None
        model = self.payload.get(subject) if isinstance(self.payload, Mapping) else self.payload
        if model is None:
            raise PermanentError(f"nothing is expected on {subject}")
        data = body.data if isinstance(body, envelope.Envelope) else body
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            raise PermanentError(f"not a {model.__name__}: {first_error(exc, 'data')}") from None

    def config(self) -> ConsumerConfig:
        filters: dict[str, Any] = (
            {"filter_subject": self.subjects[0]}
            if len(self.subjects) == 1
            else {"filter_subjects": list(self.subjects)}
        )
        return ConsumerConfig(
            name=self.name,
            durable_name=self.name,
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL,
            ack_wait=self.ack_wait,
            max_deliver=self.max_deliver + 1,  # one grace delivery, see the module docstring
            max_ack_pending=self.max_ack_pending,
            sample_freq="100%",  # every ack recorded by the broker (subjects.DELIVERIES)
            **filters,
        )


# Waiting for a dependency backs off like a retry, but only this many steps: the next try
# stays within a few seconds of the dependency's return (or of its Retry-After).
WAIT_STEPS = 4
DEAD_LETTER_REASONS = ("undecodable", "permanent", "retries_exhausted")
OUTCOMES = ("acked", "rejected", "retried", "handed_back", "dead_lettered")


class ConsumerRuntime:
    """Runs one `Consumer` inside one service process."""

    def __init__(
        self,
        bus: Bus,
        service: str,
        consumer: Consumer,
        fetch_timeout: float = 1.0,
        *,
        create: bool = True,
    ):
        self.bus = bus
        self.service = service
        self.consumer = consumer
        self.create = create  # False: an admin provisions it (`declared_consumers`); only bind
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
            await self._await_provisioned()
        self._sub = await self.bus.js.pull_subscribe_bind(
            self.consumer.name, stream=self.consumer.stream
        )
        self._loop_task = asyncio.create_task(
            self._fetch_loop(), name=f"fetch:{self.consumer.name}"
        )

    async def _await_provisioned(self) -> None:
        """A service with its own NATS user may not create or change consumers (a create
        request could point a push consumer at any subject): wait for the one provisioned."""
        c = self.consumer
        deadline = time.monotonic() + 60.0
        while True:
            try:
                info = await self.bus.js.consumer_info(c.stream, c.name)
                break
            except (js_errors.NotFoundError, nats_errors.TimeoutError, TimeoutError):
                if time.monotonic() > deadline:
                    raise TransientError(
                        f"consumer {c.stream}/{c.name} does not exist: run `desk provision`"
                    ) from None
                await asyncio.sleep(0.5)
        want, got = c.config(), info.config
        if (got.ack_wait, got.max_deliver, got.deliver_subject) != (
            want.ack_wait,
            want.max_deliver,
            None,
        ) or set(got.filter_subjects or [got.filter_subject]) != set(c.subjects):
            log.warning(
                "consumer %s/%s differs from this service's settings; `desk provision` updates it",
                c.stream,
                c.name,
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
                await self._dead_letter(msg, "undecodable", _describe(exc))
                return
            try:
                payload = c.read_payload(msg.subject, body)
            except PermanentError as exc:
                await self._dead_letter(msg, "permanent", _describe(exc))
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
                    await self._dead_letter(msg, "permanent", _describe(exc))
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
        text = _describe(down)
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
            await self._dead_letter(msg, "retries_exhausted", _describe(exc))
            return
        delay = c.retry.delay(attempt, retry_after=retry_after)
        _failed(_describe(exc))
        log.info("attempt %d failed (%s); retry in %.2fs", attempt, _describe(exc), delay)
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
        original = dict(msg.headers or {})
        hdrs = {k: v for k, v in original.items() if not k.startswith(h.BROKER_PREFIX)}
        if h.MSG_ID in original:
            hdrs[h.ORIGINAL_MSG_ID] = original[h.MSG_ID]
        hdrs.update(
            {
                h.DLQ_SERVICE: self.service,
                h.DLQ_CONSUMER: c.name,
                h.DLQ_STREAM: meta.stream,
                h.DLQ_STREAM_SEQ: str(meta.sequence.stream),
                h.DLQ_SUBJECT: msg.subject,
                h.DLQ_ATTEMPTS: str(meta.num_delivered),
                h.DLQ_REASON: reason,
                h.DLQ_ERROR: error,
                h.DLQ_TIME: dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            }
        )
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


def _describe(exc: BaseException) -> str:
    """A one-line error text for a header: class name and message, no newlines, bounded."""
    text = str(exc) or exc.__class__.__name__
    if not isinstance(exc, (TransientError, PermanentError, BusinessReject)):
        text = f"{exc.__class__.__name__}: {text}"
    return desk_logging.redact(" ".join(text.split()))[:1000]


async def _never(delivery: Delivery[Any]) -> None:  # pragma: no cover - provisioning only
    raise AssertionError("a provisioning spec is never consumed")


def declared_consumers(options: Mapping[str, Any]) -> list[tuple[str, ConsumerConfig]]:
    """Every consumer the catalog declares, as an admin provisions it (`consumer_options()` of
    the provisioning process's settings: the stack and the provision job share the services'
    configuration). Outside subscribers get a plain durable on their stream."""
    configs = []
    for role in catalog.ROLES:
        for declared in role.consumers:
            consumer = Consumer.of(declared, _never, **options)
            config = consumer.config()
            if role.settings is None:  # an outside system: no grace delivery, no dead letters
                config = ConsumerConfig(
                    name=declared.durable,
                    durable_name=declared.durable,
                    ack_policy=AckPolicy.EXPLICIT,
                    deliver_policy=DeliverPolicy.ALL,
                    filter_subject=declared.subjects[0],
                )
            configs.append((declared.stream, config))
    return configs
