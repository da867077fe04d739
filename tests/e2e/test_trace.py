"""One webhook followed to its `reply.sent` by its trace id, through a redelivery (the
helpdesk's database could not be read) and a replay (it still could not on the last allowed
attempt: a dead letter, replayed once it could): every stored message and every log line of its
hops carry the one trace, and
`desk trace` prints the path from the broker's records. With an OTLP endpoint set, every hop
is also a span exported to the collector: one connected tree from the webhook to the result."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from standins.collector import Collector, Span
from standins.llm import FakeLLM
from tests.helpers import eventually

from .test_stack import Stack, all_healthy, desk, stack

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)

__all__ = ["stack"]

TRACE_LINE = re.compile(r"^trace ([0-9a-f]{32}): (\d+) messages, correlation id (\S+)$", re.M)


async def test_one_webhook_is_one_trace_through_a_redelivery_and_a_replay(
    stack: Stack, fake_llm: FakeLLM
) -> None:
    collector = Collector().start()
    try:
        await follow_one_webhook(stack, fake_llm, collector)
    finally:
        collector.stop()


async def follow_one_webhook(stack: Stack, fake_llm: FakeLLM, collector: Collector) -> None:
    stack.env.update(
        {
            "DESK_LLM_BASE_URL": fake_llm.url,
            "DESK_LLM_API_KEY": "test-key",
            "DESK_RETRY_INITIAL": "0.2",
            "DESK_MAX_DELIVER": "2",  # the first attempt redelivered, the second dead-lettered
            "DESK_OTLP_ENDPOINT": collector.url,
            "OTEL_BSP_SCHEDULE_DELAY": "200",  # the SDK's batch interval, ms
        }
    )
    stack.up()
    await eventually(lambda: all_healthy(stack), timeout=60, message="six healthy services")

    helpdesk = stack.var / "helpdesk.sqlite"
    _rename(helpdesk, "tickets", "tickets_away")  # reading the ticket fails: a TransientError
    sent = desk(stack, "send-webhook", "--ticket", "T1012", "--priority", "normal")
    assert sent.returncode == 0, sent.stderr
    event_id = json.loads(sent.stdout.split(" ", 1)[1])["id"]

    def dead_letter() -> str | None:
        listed = desk(stack, "dlq", "list")
        found = re.search(r"^\s*(\d+)\s", listed.stdout, re.M)
        return found.group(1) if found else None

    await eventually(lambda: dead_letter() is not None, timeout=30, message="the dead letter")
    letter = dead_letter()
    assert letter is not None
    _rename(helpdesk, "tickets_away", "tickets")  # the helpdesk can be read again
    replayed = desk(stack, "dlq", "replay", letter, "--yes")
    assert replayed.returncode == 0, replayed.stderr

    def waiting() -> bool:
        return "waiting" in desk(stack, "inbox", "show", "T1012~v1").stdout

    await eventually(waiting, timeout=30, message="the draft after the replay")
    accepted = desk(stack, "inbox", "accept", "T1012~v1")
    assert accepted.returncode == 0, accepted.stderr

    def traced() -> str:
        shown = desk(stack, "trace", event_id)
        return shown.stdout if "results.reply.sent" in shown.stdout else ""

    await eventually(traced, timeout=30, message="reply.sent on the event's trace")
    out = traced()
    # one correlation id from the webhook to reply.sent: the event's own, through the work, the
    # item, the reviewer's decision (the inbox's outbox) and the result (the sender's)
    [(trace_id, count, correlation)] = TRACE_LINE.findall(out)
    subjects = re.findall(r"^  \S+  \S+\s+(\S+)  (\S+)$", out, re.M)
    assert [s for s, _ in subjects] == [
        "events.helpdesk.ticket.created",
        "work.drafter.ticket.created",
        "work.drafter.ticket.created",  # the replay
        "inbox.item",
        "inbox.decision",
        "results.reply.sent",
    ], out
    assert subjects[2][1].startswith("replay:"), out
    assert correlation == subjects[0][1], out
    # each hop's attempts, as the broker recorded how each delivery ended
    consumers = re.findall(r"^      (.+)$", out, re.M)
    assert consumers[0] == "router: done (attempt 1 ack)", out
    assert consumers[1] == "drafter: done (attempt 1 nak, attempt 2 term)", out  # the dead letter
    assert consumers[2] == "drafter: done (attempt 1 ack)", out  # the replay
    assert int(count) == len(subjects)
    for other in ("T1012~v1", trace_id):  # found by the item id and by the trace id too
        found = TRACE_LINE.findall(desk(stack, "trace", other).stdout)
        assert found == [(trace_id, count, correlation)]
    shown = desk(stack, "inbox", "show", "T1012~v1").stdout  # the item names its trace
    assert f"trace:    {trace_id} (desk trace {trace_id})" in shown, shown

    # the drafter's retry and its dead letter were logged under the same trace
    drafter = [
        json.loads(line) for line in (stack.var / "log" / "drafter.log").read_text().splitlines()
    ]
    retried = [r for r in drafter if "retry in" in r["message"]]
    lettered = [r for r in drafter if r["message"].startswith("dead-lettered")]
    assert retried and {r.get("trace_id") for r in retried} == {trace_id}
    assert lettered and {r.get("trace_id") for r in lettered} == {trace_id}
    inbox = [
        json.loads(line) for line in (stack.var / "log" / "inbox_api.log").read_text().splitlines()
    ]
    [projected] = [r for r in inbox if r["message"] == "item T1012~v1 is in the inbox"]
    assert projected.get("trace_id") == trace_id

    # the same path as spans at the collector: one tree, rooted at the webhook's request
    def spans() -> list[Span]:
        return [s for s in collector.spans() if s.trace_id == trace_id]

    def reached_the_result() -> bool:
        return any(s.name == "publish results.reply.sent" for s in spans())

    await eventually(reached_the_result, timeout=30, message="the result's span at the collector")
    found = spans()
    by_id = {s.span_id: s for s in found}
    [root] = [s for s in found if s.parent_span_id not in by_id]
    assert (root.name, root.kind, root.service) == ("POST /webhooks/helpdesk", "SERVER", "ingress")
    assert root.attributes["http.response.status_code"] == 202
    drafting = [s for s in found if s.name == "process work.drafter.ticket.created"]
    assert [(s.attributes["desk.attempt"], s.attributes["desk.outcome"]) for s in drafting] == [
        (1, "retried"),
        (2, "dead_lettered"),
        (1, "acked"),  # the replay: a new message, the same trace
    ], drafting
    assert drafting[0].error and drafting[1].error and drafting[2].error is None
    assert {s.service for s in found} >= {"ingress", "router", "drafter", "inbox_api", "sender"}

    def path(span: Span) -> list[str]:
        names = []
        while span.parent_span_id in by_id:
            names.append(span.name)
            span = by_id[span.parent_span_id]
        return [*names, span.name][::-1]

    [result] = [s for s in found if s.name == "publish results.reply.sent"]
    assert path(result) == [
        "POST /webhooks/helpdesk",
        "process events.helpdesk.ticket.created",
        "publish work.drafter.ticket.created",
        "process work.drafter.ticket.created",
        "publish inbox.item",
        "process inbox.item",  # the inbox's projection, whose row the decision continues
        "publish inbox.decision",
        "process inbox.decision",
        "publish results.reply.sent",
    ], path(result)


def _rename(database: Path, table: str, to: str) -> None:
    with sqlite3.connect(database) as connection:
        connection.execute(f"ALTER TABLE {table} RENAME TO {to}")
