"""A real OTLP/HTTP trace receiver standing in for an OpenTelemetry collector.

`POST /v1/traces` takes an `ExportTraceServiceRequest` in protobuf (gzip or not), as the SDK's
OTLP/HTTP exporter sends it, and answers the protocol's empty success. Every span received is
kept as a `Span`, flattened from resource → scope → span.

    collector = Collector().start()      # or: with Collector() as collector: ...
    ... DESK_OTLP_ENDPOINT=collector.url ...
    collector.spans()                    # every span so far, in arrival order
    collector.stop()
"""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanMessage
from opentelemetry.proto.trace.v1.trace_pb2 import Status
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .server import ThreadedServer

PROTOBUF = "application/x-protobuf"


@dataclass(frozen=True)
class Span:
    trace_id: str  # 32 hex
    span_id: str  # 16 hex
    parent_span_id: str  # 16 hex, "" for a root span
    name: str
    kind: str  # "SERVER", "CONSUMER", "PRODUCER", "INTERNAL", "CLIENT"
    service: str  # the resource's service.name
    attributes: dict[str, Any] = field(default_factory=dict)
    error: str | None = None  # the status message of a span whose status is ERROR
    start_ns: int = 0
    end_ns: int = 0


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


class Collector:
    """An OTLP/HTTP receiver on 127.0.0.1, in a background thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spans: list[Span] = []
        self.requests = 0
        self._server = ThreadedServer(
            Starlette(routes=[Route("/v1/traces", self._export, methods=["POST"])]),
            name="Collector",
        )

    @property
    def url(self) -> str:
        """The base URL, as DESK_OTLP_ENDPOINT takes it (the exporter adds /v1/traces)."""
        return self._server.base_url

    def start(self, timeout: float = 10.0) -> Collector:
        self._server.start(timeout)
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> Collector:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def spans(self) -> list[Span]:
        with self._lock:
            return list(self._spans)

    async def _export(self, request: Request) -> Response:
        body = await request.body()
        if request.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        if request.headers.get("content-type") != PROTOBUF:
            return Response(status_code=415)
        export = ExportTraceServiceRequest()
        export.ParseFromString(body)
        found = []
        for resource_spans in export.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    failed = span.status.code == Status.STATUS_CODE_ERROR
                    found.append(
                        Span(
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            name=span.name,
                            kind=SpanMessage.SpanKind.Name(span.kind).removeprefix("SPAN_KIND_"),
                            service=str(resource.get("service.name", "")),
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            error=span.status.message if failed else None,
                            start_ns=span.start_time_unix_nano,
                            end_ns=span.end_time_unix_nano,
                        )
                    )
        with self._lock:
            self._spans.extend(found)
            self.requests += 1
        return Response(
            ExportTraceServiceResponse().SerializeToString(), media_type=PROTOBUF, status_code=200
        )
