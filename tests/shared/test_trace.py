"""W3C trace context: parsed strictly, continued hop by hop, started or continued at ingress."""

from __future__ import annotations

import datetime as dt
import logging

import pytest

from services.ingress import nats_headers
from shared import subjects, trace
from shared.bus import Bus
from shared.logging import JsonFormatter
from shared.trace import Trace

VALID = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_only_a_valid_version_00_traceparent_is_taken() -> None:
    found = Trace.parse(VALID)
    assert found == Trace("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "01")
    assert found is not None and found.header == VALID
    for bad in (
        None,
        "",
        "garbage",
        VALID.replace("00-", "01-", 1),  # another version
        "00-" + "0" * 32 + "-00f067aa0ba902b7-01",  # the all-zero trace id is invalid
        "00-4bf92f3577b34da6a3ce929d0e0e4736-" + "0" * 16 + "-01",
        VALID + "-extra",
        VALID.replace("4bf9", "zzzz"),
    ):
        assert Trace.parse(bad) is None, bad


def test_a_hop_keeps_the_trace_and_gets_a_span_of_its_own() -> None:
    parent = Trace.new()
    child = parent.child()
    assert child.trace_id == parent.trace_id and child.span_id != parent.span_id


async def test_messages_published_while_a_trace_is_current_continue_it(bus: Bus) -> None:
    """Each publish is a span of the current trace (its id the message's parent span); a
    message that names its trace already (an event, a dead letter) keeps it."""

    async def published(subject: str, headers: dict[str, str] | None = None) -> Trace | None:
        sent = await bus.publish(subject, b"{}", msg_id=subject, headers=headers)
        stored = await bus.js.get_msg(subjects.WORK, sent.seq)
        return trace.of(stored.headers)

    assert await published("work.drafter.none") is None, "no trace current: nothing added"
    with trace.continued(Trace.parse(VALID)):
        added = await published("work.drafter.one")
        assert added is not None and added.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"
        assert added.span_id != "00f067aa0ba902b7"
        named = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
        assert await published("work.drafter.two", {"TraceParent": named}) == Trace.parse(named)
    assert trace.current.get() is None


def test_ingress_starts_a_trace_or_continues_the_callers() -> None:
    received = dt.datetime.now(dt.UTC)
    started = nats_headers([], "helpdesk", "e1", "ticket.created", "helpdesk:e1", received)
    assert Trace.parse(started[trace.HEADER]) is not None
    continued = nats_headers(
        [("traceparent", VALID)], "helpdesk", "e1", "ticket.created", "helpdesk:e1", received
    )
    found = Trace.parse(continued[trace.HEADER])
    assert found is not None and found.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert found.span_id != "00f067aa0ba902b7"
    junk = nats_headers(
        [("traceparent", "junk")], "helpdesk", "e1", "ticket.created", "helpdesk:e1", received
    )
    assert Trace.parse(junk[trace.HEADER]) is not None, "an invalid one starts a new trace"


@pytest.mark.parametrize("trace_id", ["4bf92f3577b34da6a3ce929d0e0e4736", "4155550134" * 3 + "00"])
def test_every_log_line_carries_the_trace_id_unredacted(trace_id: str) -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "hello", None, None)
    with trace.continued(Trace(trace_id, "00f067aa0ba902b7")):
        line = JsonFormatter("probe").format(record)
    assert f'"trace_id": "{trace_id}"' in line
