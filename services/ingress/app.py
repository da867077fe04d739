"""`POST /webhooks/{source}`: verify, record, answer. No model calls, no database.

202 only after the JetStream PubAck; any refusal publishes nothing; no input yields a 500.
A body that stops arriving gets 408 once `body_timeout` has passed since the headers. A source
without a timestamp has its replays answered as duplicates (see `replays`).
"""

from __future__ import annotations

import datetime as dt
import functools
import gc
import logging
import time
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any

from prometheus_client import Counter
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from shared import telemetry, trace
from shared.bodies import BodyRefused, closing, read_limited
from shared.bus import Bus
from shared.bus.pipeline import Pipeline
from shared.errors import PermanentError, TransientError
from shared.signatures import SignatureError, TimestampError

from . import metrics
from .intake import Event, RequestError, event_for, parse_json, verify
from .replays import Replays
from .sources import Source

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WebhookConfig:
    """The configured sources, and the limits every webhook request is held to."""

    sources: dict[str, Source]
    max_body: int
    retry_after: int
    body_timeout: float = 10.0


def _error(status: int, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, **extra)


def _unavailable(config: WebhookConfig) -> JSONResponse:
    return _error(
        503,
        "event store unavailable; retry later",
        headers={"Retry-After": str(config.retry_after)},
    )


def _json_content_type(value: str) -> bool:
    media = value.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def _first(headers: list[tuple[str, str]], name: str) -> str:
    """The first value of a (lower-case) header, as Starlette's `headers.get` gives it."""
    for key, value in headers:
        if key.lower() == name:
            return value
    return ""


# Bounded anyway: the configured sources (or "unknown") times the statuses.
@functools.lru_cache(maxsize=1024)
def _requests(label: str, status: int) -> Counter:
    return metrics.REQUESTS.labels(label, str(status))


async def receive(request: Request) -> Response:
    config: WebhookConfig = request.app.state.webhook_config
    name = request.path_params["source"]
    source = config.sources.get(name)
    label = name if source else metrics.UNKNOWN
    try:
        response = await _receive(request, config, source)
    except BodyRefused as exc:
        response = _error(exc.status, str(exc), headers=closing(exc))
    except RequestError as exc:
        response = _error(exc.status, str(exc))
    except SignatureError as exc:
        metrics.SIGNATURE_FAILURES.labels(label, exc.reason).inc()
        response = _error(401, "signature not valid")
    except TimestampError as exc:
        response = _error(400, str(exc))
    except ClientDisconnect:
        response = _error(400, "client disconnected")
    _requests(label, response.status_code).inc()
    return response


async def _receive(request: Request, config: WebhookConfig, source: Source | None) -> Response:
    if source is None:
        raise RequestError(404, "unknown source")
    raw_headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.scope["headers"]]
    if not _json_content_type(_first(raw_headers, "content-type")):
        raise RequestError(415, "content type must be application/json")
    body = await read_limited(
        request.receive,
        _first(raw_headers, "content-length") or None,
        config.max_body,
        config.body_timeout,
    )
    lower = {k.lower(): v for k, v in raw_headers}
    verify(source, lower, body, time.time())
    document = parse_json(body)
    received = dt.datetime.now(dt.UTC)
    event = event_for(source, document, body, lower, raw_headers, received)
    # the request is the event's first span: its id is the parent the event's headers name
    with telemetry.span(
        f"POST /webhooks/{source.name}",
        "server",
        parent=trace.of(lower),
        this=trace.of(event.headers),
        attributes={
            "http.request.method": "POST",
            "http.route": "/webhooks/{source}",
            "desk.source": source.name,
            "desk.event_type": event.type,
            "messaging.message.id": event.msg_id,
        },
    ) as receiving:
        response = await _store(request, config, source, event, body)
        receiving.attributes["http.response.status_code"] = response.status_code
        if response.status_code >= 500:
            receiving.fail("event not stored")
        return response


async def _store(
    request: Request, config: WebhookConfig, source: Source, event: Event, body: bytes
) -> Response:
    bus: Bus | None = request.app.state.service.connection
    if bus is None or not bus.connected:
        return _unavailable(config)
    replays: Replays = request.app.state.replays
    guarded = not source.timestamped
    if guarded:
        if not replays.attached:
            return _unavailable(config)
        try:
            if await replays.seen(source.name, event.digest):
                metrics.DUPLICATES.labels(source.name).inc()
                log.debug("replay refused", extra={"event_id": event.msg_id})
                return _accepted(event.id, True)
        except TransientError as exc:
            log.warning("replay ledger unavailable: %s", exc, extra={"event_id": event.msg_id})
            return _unavailable(config)
    pipeline: Pipeline = request.app.state.pipeline
    started = time.perf_counter()
    try:
        if pipeline.attached:
            published = await pipeline.record(
                event.subject, body, msg_id=event.msg_id, headers=event.headers
            )
        else:  # connected a moment ago; the pipeline is on its way
            published = await bus.publish(
                event.subject, body, msg_id=event.msg_id, headers=event.headers
            )
    except (TransientError, PermanentError) as exc:
        log.warning("event not stored: %s", exc, extra={"event_id": event.msg_id})
        return _unavailable(config)
    if guarded:
        # After the PubAck: stored, then remembered. If remembering fails the sender is asked
        # to retry; the broker drops the copy (same `Nats-Msg-Id`) and the retry remembers it.
        try:
            await replays.remember(source.name, event.digest, published.seq)
        except TransientError as exc:
            log.warning("stored, replay not remembered: %s", exc, extra={"event_id": event.msg_id})
            return _unavailable(config)
    metrics.PUBLISH_SECONDS.observe(time.perf_counter() - started)
    metrics.BODY_BYTES.observe(len(body))
    if published.duplicate:
        metrics.DUPLICATES.labels(source.name).inc()
    # One line per event is DEBUG: the EVENTS stream is the record of what arrived, and the
    # metrics count it. (At INFO, formatting and redacting this one line took ~200 µs of CPU
    # per event: about half as much again as everything else ingress does for a request.)
    log.debug(
        "event %s",
        "duplicate" if published.duplicate else "stored",
        extra={"event_id": event.msg_id, "type": event.type},
    )
    return _accepted(event.id, published.duplicate)


def _accepted(event_id: str, duplicate: bool) -> Response:
    """The bytes `JSONResponse({"accepted": True, "duplicate": …, "id": …}, 202)` sends, put
    together directly (a JSONResponse builds a JSON encoder per response)."""
    body = b'{"accepted":true,"duplicate":%s,"id":%s}' % (
        b"true" if duplicate else b"false",
        encode_basestring(event_id).encode(),
    )
    return Response(body, status_code=202, media_type="application/json")


routes = [Route("/webhooks/{source}", receive, methods=["POST"])]


GC_YOUNG_THRESHOLD = 5000  # Python's default is 700


def settle_gc() -> None:
    """Once started: keep start-up objects out of garbage collection, and collect less often.

    The ingress process holds ~90k long-lived objects from start-up (every module `desk`
    imports). Each full collection walked them all (~50 ms: a latency spike every few thousand
    requests), and with the default threshold the young generation was collected every ~10
    requests while 64 were in flight. Measured under load: ~60 µs of collection per request
    before, about 10 µs after. Cyclic garbage is still collected, in larger batches.
    """
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)
