"""Spans, and their optional export to an OpenTelemetry collector over OTLP/HTTP.

The trace context (`shared.trace`) always flows from hop to hop, and every log line names it.
Each piece of work a process does for a trace is a span of it: a webhook received (server), a
delivery handled (consumer), a message published (producer), a backfilled event (producer). Its
`Trace` is current while the work runs, so what it publishes names it as the parent.

With `DESK_OTLP_ENDPOINT` set, each finished span is also exported there: batched, from a
background thread, by the OpenTelemetry SDK's `BatchSpanProcessor` and OTLP/HTTP exporter. A
collector that is slow or down costs the spans and a warning, never the work: the queue is
bounded and nothing waits on it. Without the setting nothing is recorded, nothing is imported,
and nothing changes. Spans the caller marked as not sampled (flags 00) are not exported.

A mail's Message-ID (`<local@host>`) is chosen by whoever sent it and names them and their mail
server; it reaches ids (`email:<…>#digest`, the router's `…>drafter`) that spans carry. So
before a span leaves, every `local@host` in its name, attributes and error becomes `mid:` and a
short sha256 of it (`scrub`): the same mail still has the same mark across spans, and a
collector, shared with whoever runs it, never learns an address or a Message-ID.

    with telemetry.span("process work.drafter.ticket.created", "consumer",
                        parent=trace.of(headers), attributes={...}) as work:
        ...                      # work.trace is current; work.fail("...") marks it an error
"""

from __future__ import annotations

import contextvars
import hashlib
import logging
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from . import trace
from .trace import Trace

if TYPE_CHECKING:
    from .otlp import Exporter

log = logging.getLogger(__name__)

Kind = Literal["server", "consumer", "producer", "internal"]
TRACES_PATH = "/v1/traces"


@dataclass
class Span:
    name: str
    kind: Kind
    trace: Trace  # this span: its id is what the work it starts names as parent
    parent: Trace | None
    attributes: dict[str, Any] = field(default_factory=dict)
    start_ns: int = field(default_factory=time.time_ns)
    error: str | None = None

    def fail(self, message: str) -> None:
        self.error = message


_exporter: Exporter | None = None
_current: contextvars.ContextVar[Span | None] = contextvars.ContextVar("span", default=None)


def traces_url(endpoint: str) -> str:
    """A collector's base URL (http://collector:4318), or its full traces URL, as the URL the
    exporter posts to."""
    base = endpoint.rstrip("/")
    return base if base.endswith(TRACES_PATH) else base + TRACES_PATH


def configure(service: str, endpoint: str | None, headers: Mapping[str, str] | None = None) -> None:
    """Export this process's spans to `endpoint` (None: record nothing)."""
    global _exporter
    shutdown()
    if endpoint:
        from .otlp import Exporter  # the SDK is imported only when spans are exported

        _exporter = Exporter(service, traces_url(endpoint), headers or {})
        # the URL only: headers may carry the collector's credentials
        log.info("exporting spans to %s", traces_url(endpoint))


def enabled() -> bool:
    return _exporter is not None


def shutdown(timeout: float = 5.0) -> None:
    """Send what is queued (for up to `timeout`), then stop exporting. Blocking."""
    global _exporter
    exporter, _exporter = _exporter, None
    if exporter is not None:
        exporter.shutdown(timeout)


def record(span: Span) -> None:
    """Export a finished span, scrubbed, if exporting and the trace is sampled."""
    exporter = _exporter
    if exporter is not None and int(span.trace.flags, 16) & 1:
        exporter.record(scrubbed(span), time.time_ns())


# `local@host`, with or without the angle brackets of a Message-ID, as it sits inside an id
_MAIL_ID = re.compile(r"<?[^\s<>@]+@[^\s<>]+>?")


def scrub(text: str) -> str:
    """`text` with every Message-ID or address in it replaced by `mid:<16 hex of sha256>`."""
    if "@" not in text:
        return text

    def mark(found: re.Match[str]) -> str:
        bare = found.group().removeprefix("<").removesuffix(">")
        return "mid:" + hashlib.sha256(bare.encode()).hexdigest()[:16]

    return _MAIL_ID.sub(mark, text)


def scrubbed(span: Span) -> Span:
    """A copy of `span` to export: its name, string attributes and error scrubbed."""
    attributes = {k: scrub(v) if isinstance(v, str) else v for k, v in span.attributes.items()}
    return Span(
        scrub(span.name),
        span.kind,
        span.trace,
        span.parent,
        attributes,
        span.start_ns,
        scrub(span.error) if span.error else None,
    )


@contextmanager
def span(
    name: str,
    kind: Kind,
    *,
    parent: Trace | None,
    attributes: Mapping[str, Any] | None = None,
    this: Trace | None = None,
) -> Iterator[Span]:
    """A span of `parent`'s trace (of a new trace when there is none), current inside the
    block, recorded when it ends. `this` names the span's own context when it is already
    decided (ingress writes it into the event's headers before the span ends)."""
    own = this or (parent.child() if parent else Trace.new())
    found = Span(name, kind, own, parent, dict(attributes or {}))
    token, traced = _current.set(found), trace.current.set(own)  # as `trace.continued(own)`
    try:
        yield found
    except BaseException as exc:
        if found.error is None:
            found.fail(exc.__class__.__name__)
        raise
    finally:
        _current.reset(token)
        record(found)
        trace.current.reset(traced)


def current() -> Span | None:
    """The span the running work belongs to, if any."""
    return _current.get()
