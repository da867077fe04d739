"""Spans: each piece of work is a span of its trace, current while it runs; with an OTLP
endpoint configured, finished spans reach a real OTLP/HTTP receiver, and without one nothing is
sent anywhere."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import ValidationError

from shared import telemetry, trace
from shared.errors import first_error
from shared.settings import RouterSettings
from shared.trace import Trace
from standins.collector import Collector

PARENT = Trace("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "01")


@pytest.fixture
def collector() -> Iterator[Collector]:
    with Collector() as running:
        yield running
    telemetry.shutdown()


def test_a_span_continues_its_parent_and_is_current_inside() -> None:
    with telemetry.span("process x", "consumer", parent=PARENT) as work:
        assert work.trace.trace_id == PARENT.trace_id and work.trace.span_id != PARENT.span_id
        assert trace.current.get() == work.trace and telemetry.current() is work
    assert trace.current.get() is None and telemetry.current() is None
    with telemetry.span("reconcile x", "internal", parent=None) as root:
        assert root.trace.trace_id != PARENT.trace_id, "no parent: a trace starts"


def test_finished_spans_are_exported_with_their_parent_kind_and_outcome(
    collector: Collector,
) -> None:
    telemetry.configure("router", collector.url)
    with telemetry.span(
        "process events.helpdesk.ticket.created",
        "consumer",
        parent=PARENT,
        attributes={"desk.attempt": 2},
    ) as work:
        with telemetry.span("publish work.drafter.x", "producer", parent=trace.current.get()):
            pass
        work.fail("TransientError: the model answered 503")
    with pytest.raises(RuntimeError), telemetry.span("boom", "internal", parent=PARENT):
        raise RuntimeError("a bug")
    telemetry.shutdown()  # sends what is queued

    spans = {s.name: s for s in collector.spans()}
    process, publish, boom = (
        spans["process events.helpdesk.ticket.created"],
        spans["publish work.drafter.x"],
        spans["boom"],
    )
    assert process.trace_id == publish.trace_id == PARENT.trace_id
    assert process.parent_span_id == PARENT.span_id and process.kind == "CONSUMER"
    assert publish.parent_span_id == process.span_id and publish.kind == "PRODUCER"
    assert process.service == "router" and process.attributes["desk.attempt"] == 2
    assert process.error == "TransientError: the model answered 503" and publish.error is None
    assert boom.error == "RuntimeError"
    assert process.start_ns <= publish.start_ns <= publish.end_ns <= process.end_ns


def test_nothing_is_exported_unconfigured_or_for_an_unsampled_trace(collector: Collector) -> None:
    assert not telemetry.enabled()
    with telemetry.span("unconfigured", "internal", parent=PARENT):
        pass
    telemetry.configure("router", collector.url + "/v1/traces")  # the full URL works too
    with telemetry.span("not sampled", "internal", parent=Trace(PARENT.trace_id, "1" * 16, "00")):
        pass
    with telemetry.span("sampled", "internal", parent=PARENT):
        pass
    telemetry.shutdown()
    assert [s.name for s in collector.spans()] == ["sampled"]


def test_the_collector_settings_are_checked_without_repeating_the_credentials() -> None:
    settings = RouterSettings(
        otlp_endpoint="http://collector:4318",
        otlp_headers="x-api-key=s3cret-key, tenant=acme",
        _env_file=None,
    )
    assert settings.otlp_header_map() == {"x-api-key": "s3cret-key", "tenant": "acme"}
    assert "s3cret-key" not in repr(settings)
    with pytest.raises(ValidationError, match="entry 2 is not name=value") as bad:
        RouterSettings(otlp_headers="x-api-key=s3cret-key,s3cret-other", _env_file=None)
    said = first_error(bad.value, "settings")  # what `desk <service>` prints
    assert "entry 2 is not name=value" in said and "s3cret" not in said
    with pytest.raises(ValidationError, match="http:// or https://"):
        RouterSettings(otlp_endpoint="collector:4318", _env_file=None)
