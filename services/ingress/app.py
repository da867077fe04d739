"""`POST /webhooks/{source}`: verify, record, answer. No model calls, no database.

202 only after the JetStream PubAck; any refusal publishes nothing; no input yields a 500.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from shared.bus import Bus
from shared.errors import PermanentError, TransientError
from shared.signatures import SignatureError, TimestampError

from . import metrics
from .intake import RequestError, event_for, parse_json, verify
from .sources import Source

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Intake:
    sources: dict[str, Source]
    max_body: int
    retry_after: int


def _error(status: int, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, **extra)


def _json_content_type(value: str) -> bool:
    media = value.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


async def _read_limited(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise RequestError(413, f"body larger than {limit} bytes")
    chunks = bytearray()
    async for chunk in request.stream():
        chunks += chunk
        if len(chunks) > limit:
            raise RequestError(413, f"body larger than {limit} bytes")
    return bytes(chunks)


async def receive(request: Request) -> Response:
    intake: Intake = request.app.state.intake
    name = request.path_params["source"]
    source = intake.sources.get(name)
    label = name if source else "unknown"
    try:
        response = await _receive(request, intake, source)
    except RequestError as exc:
        response = _error(exc.status, str(exc))
    except SignatureError as exc:
        metrics.SIGNATURE_FAILURES.labels(label, exc.reason).inc()
        response = _error(401, "signature not valid")
    except TimestampError as exc:
        response = _error(400, str(exc))
    except ClientDisconnect:
        response = _error(400, "client disconnected")
    metrics.REQUESTS.labels(label, str(response.status_code)).inc()
    return response


async def _receive(request: Request, intake: Intake, source: Source | None) -> Response:
    if source is None:
        raise RequestError(404, "unknown source")
    if not _json_content_type(request.headers.get("content-type", "")):
        raise RequestError(415, "content type must be application/json")
    body = await _read_limited(request, intake.max_body)
    lower = {k.lower(): v for k, v in request.headers.items()}
    verify(source, lower, body, time.time())
    document = parse_json(body)
    received = dt.datetime.now(dt.UTC)
    raw_headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw]
    event = event_for(source, document, lower, raw_headers, received)

    unavailable = _error(
        503,
        "event store unavailable; retry later",
        headers={"Retry-After": str(intake.retry_after)},
    )
    bus: Bus | None = request.app.state.service.bus
    if bus is None or not bus.connected:
        return unavailable
    started = time.perf_counter()
    try:
        published = await bus.publish(
            event.subject, body, msg_id=event.msg_id, headers=event.headers
        )
    except (TransientError, PermanentError) as exc:
        log.warning("event not stored: %s", exc, extra={"event_id": event.msg_id})
        return unavailable
    metrics.PUBLISH_SECONDS.observe(time.perf_counter() - started)
    metrics.BODY_BYTES.observe(len(body))
    if published.duplicate:
        metrics.DUPLICATES.labels(source.name).inc()
    log.info(
        "event %s",
        "duplicate" if published.duplicate else "stored",
        extra={"event_id": event.msg_id, "type": event.type},
    )
    return JSONResponse(
        {"accepted": True, "duplicate": published.duplicate, "id": event.id}, status_code=202
    )


routes = [Route("/webhooks/{source}", receive, methods=["POST"])]
