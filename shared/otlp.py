"""The OpenTelemetry SDK's side of `shared.telemetry`: imported only when spans are exported."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from typing import TYPE_CHECKING

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from .trace import Trace

if TYPE_CHECKING:
    from .telemetry import Span

SCOPE = "ambient-desk"


class Exporter:
    """The SDK's batching processor and OTLP/HTTP exporter, for one process."""

    def __init__(self, service: str, url: str, headers: Mapping[str, str]) -> None:
        self.resource = Resource.create(
            {
                "service.name": service,
                "service.namespace": SCOPE,
                "service.instance.id": f"{socket.gethostname()}-{os.getpid()}",
            }
        )
        self.scope = InstrumentationScope(SCOPE)
        self.processor = BatchSpanProcessor(
            OTLPSpanExporter(endpoint=url, headers=dict(headers), timeout=10)
        )

    def record(self, span: Span, end_ns: int) -> None:
        status = Status(StatusCode.ERROR, span.error) if span.error else Status(StatusCode.UNSET)
        self.processor.on_end(
            ReadableSpan(
                name=span.name,
                context=_context(span.trace, remote=False),
                parent=_context(span.parent, remote=True) if span.parent else None,
                resource=self.resource,
                attributes=span.attributes,
                kind=SpanKind[span.kind.upper()],
                status=status,
                start_time=span.start_ns,
                end_time=end_ns,
                instrumentation_scope=self.scope,
            )
        )

    def shutdown(self, timeout: float) -> None:
        self.processor.force_flush(int(timeout * 1000))
        self.processor.shutdown()


def _context(of: Trace, *, remote: bool) -> SpanContext:
    return SpanContext(
        int(of.trace_id, 16),
        int(of.span_id, 16),
        is_remote=remote,
        trace_flags=TraceFlags(int(of.flags, 16)),
    )
