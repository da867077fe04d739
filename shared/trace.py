"""W3C trace context: one trace id follows an event through every hop.

Ingress starts a trace for each webhook (or continues the caller's, when the request carries a
valid `traceparent`) and stores it in the event's NATS headers. Every hop after that carries it
on: the consumer runtime handles each delivery as a span of the trace its message names, and
the bus writes the current trace, as a new span of it, into every message published meanwhile
(`shared.telemetry`: each span can also be exported, over OTLP). Where
work is picked up later from a database (a decision made in the inbox, a result relayed from
the outbox), the trace stored with the row is made current for that publish. Dead letters keep
the original headers, so a replay continues the same trace. Every log line written meanwhile
carries the trace id.

    traceparent: 00-<trace id, 32 hex>-<parent span id, 16 hex>-<flags, 2 hex>
"""

from __future__ import annotations

import contextvars
import random
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

HEADER = "traceparent"  # the W3C name, as HTTP and NATS carry it

_FORMAT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
_INVALID_TRACE = "0" * 32
_INVALID_SPAN = "0" * 16


@dataclass(frozen=True)
class Trace:
    trace_id: str
    span_id: str
    flags: str = "01"  # sampled

    @classmethod
    def new(cls) -> Trace:
        return cls(_random_id(128), _random_id(64))

    @classmethod
    def parse(cls, value: str | None) -> Trace | None:
        """The trace a `traceparent` value names, or None for anything not valid version 00."""
        found = _FORMAT.match((value or "").strip().lower())
        if found is None:
            return None
        trace_id, span_id, flags = found.groups()
        if trace_id == _INVALID_TRACE or span_id == _INVALID_SPAN:
            return None
        return cls(trace_id, span_id, flags)

    def child(self) -> Trace:
        """The next hop: the same trace, a span of its own."""
        return Trace(self.trace_id, _random_id(64), self.flags)

    @property
    def header(self) -> str:
        return f"00-{self.trace_id}-{self.span_id}-{self.flags}"


current: contextvars.ContextVar[Trace | None] = contextvars.ContextVar("trace", default=None)


def _random_id(bits: int) -> str:
    """A random id of `bits` bits in hex, never all zeros (W3C's invalid value). Ids name
    traces, they guard nothing: the generator is Python's, as OpenTelemetry's SDK does (a
    system call per id was a tenth of ingress's own work)."""
    while True:
        value = random.getrandbits(bits)
        if value:
            return f"{value:0{bits // 4}x}"


def of(headers: Mapping[str, str] | None) -> Trace | None:
    """The trace a message's (or a request's) headers carry, whatever the header's case."""
    if not headers:
        return None
    value = headers.get(HEADER)  # as ours and most are written: no walk through the others
    if value is not None:
        return Trace.parse(value)
    for name, value in headers.items():
        if name.lower() == HEADER:
            return Trace.parse(value)
    return None


def trace_id() -> str | None:
    found = current.get()
    return found.trace_id if found else None


@contextmanager
def continued(trace: Trace | None) -> Iterator[Trace | None]:
    """Make `trace` current inside the block (None: leave whatever is current)."""
    if trace is None:
        yield current.get()
        return
    token = current.set(trace)
    try:
        yield trace
    finally:
        current.reset(token)


def current_header() -> str | None:
    """The current trace as a `traceparent` value, to store with work picked up later."""
    found = current.get()
    return found.header if found else None
