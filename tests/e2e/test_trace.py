"""One webhook followed to its `reply.sent` by its trace id, through a redelivery (the model
answered 503 once) and a replay (it then refused the credentials: a dead letter, replayed once
the model worked): every stored message and every log line of its hops carry the one trace, and
`desk trace` prints the path from the broker's records."""

from __future__ import annotations

import json
import re

from standins.llm import FakeLLM
from tests.helpers import eventually

from .test_stack import Stack, all_healthy, desk, stack

__all__ = ["stack"]

TRACE_LINE = re.compile(r"^trace ([0-9a-f]{32}): (\d+) messages$", re.M)


async def test_one_webhook_is_one_trace_through_a_redelivery_and_a_replay(
    stack: Stack, fake_llm: FakeLLM
) -> None:
    fake_llm.fail_next(503)  # the first attempt: transient, redelivered
    fake_llm.fail_next(401)  # the second: permanent, dead-lettered
    stack.env.update(
        {
            "DESK_LLM_BASE_URL": fake_llm.url,
            "DESK_LLM_API_KEY": "test-key",
            "DESK_RETRY_INITIAL": "0.2",
        }
    )
    stack.up()
    await eventually(lambda: all_healthy(stack), timeout=60, message="six healthy services")

    sent = desk(stack, "send-webhook", "--ticket", "T1012")
    assert sent.returncode == 0, sent.stderr
    event_id = json.loads(sent.stdout.split(" ", 1)[1])["id"]

    def dead_letter() -> str | None:
        listed = desk(stack, "dlq", "list")
        found = re.search(r"^\s*(\d+)\s", listed.stdout, re.M)
        return found.group(1) if found else None

    await eventually(lambda: dead_letter() is not None, timeout=30, message="the dead letter")
    letter = dead_letter()
    assert letter is not None
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
    [(trace_id, count)] = TRACE_LINE.findall(out)
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
    assert int(count) == len(subjects)
    for other in ("T1012~v1", trace_id):  # found by the item id and by the trace id too
        assert TRACE_LINE.findall(desk(stack, "trace", other).stdout) == [(trace_id, count)]
    shown = desk(stack, "inbox", "show", "T1012~v1").stdout  # the item names its trace
    assert f"trace:    {trace_id} (desk trace {trace_id})" in shown, shown

    # the drafter's retry and its dead letter were logged under the same trace
    drafter = [json.loads(line) for line in (stack.var / "log" / "drafter.log").open()]
    retried = [r for r in drafter if "retry in" in r["message"]]
    lettered = [r for r in drafter if r["message"].startswith("dead-lettered")]
    assert retried and {r.get("trace_id") for r in retried} == {trace_id}
    assert lettered and {r.get("trace_id") for r in lettered} == {trace_id}
    inbox = [json.loads(line) for line in (stack.var / "log" / "inbox_api.log").open()]
    [projected] = [r for r in inbox if r["message"] == "item T1012~v1 is in the inbox"]
    assert projected.get("trace_id") == trace_id
