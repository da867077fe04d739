"""`desk shadow` against a real inbox_api process and nats-server: the events stored in EVENTS
name the tickets, the inbox gives each round's conversation, live draft and sent reply, the
candidate drafts them again; the report compares both with what was sent, and nothing is
published or decided. (That the `shadow` user may publish nothing at all is the insider
campaign's to prove: tests/e2e/test_insiders.py probes every role in the catalog.)"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
import uuid
from pathlib import Path

from shared import ids, subjects
from shared.bus import Bus
from shared.helpdesk.events import ticket_event
from shared.permissions import service_permissions
from standins.llm import FakeLLM, default_responder
from tests.inbox_items import conversation, draft_item

from .conftest import Api
from .test_api import waiting

SENT = (
    "Hi Jane, once we confirm a refund it is processed within 5 business days; your bank may "
    "take 3 to 5 more to show it. The Support Team"
)


async def counts(bus: Bus) -> dict[str, int]:
    return {
        s: (await bus.js.stream_info(s)).state.messages for s in (subjects.INBOX, subjects.RESULTS)
    }


def test_the_shadow_user_may_only_read_the_events() -> None:
    grants = service_permissions("shadow")
    assert all(p.startswith("$JS.API.") for p in grants.publish), grants.publish
    writes = [p for p in grants.publish if "DIRECT.GET" not in p and ".INFO" not in p]
    assert writes == ["$JS.API.STREAM.MSG.GET.EVENTS"], writes


async def test_shadow_drafts_real_rounds_again_and_publishes_nothing(
    api: Api, nats_bus: Bus, tmp_path: Path
) -> None:
    ticket = f"T{uuid.uuid4().hex[:8]}"
    said = conversation(ticket, ("customer", "My refund has not arrived. How long does it take?"))
    item = draft_item(ticket, conversation=said).model_copy(
        update={"round": said[0].id, "round_messages": [said[0].id]}
    )
    body = ticket_event("ticket.created", ticket, event_id=f"evt_{ticket}")
    await nats_bus.publish(
        "events.helpdesk.ticket.created",
        json.dumps(body).encode(),
        msg_id=ids.ingress("helpdesk", body["id"]),
    )
    await waiting(api, nats_bus, item)
    async with api.client() as client:
        answer = await client.post(
            f"/api/items/{item.id}/decision", json={"type": "edit", "args": SENT, "version": 1}
        )
        assert answer.status_code == 202, answer.text
        log_before = (await client.get("/api/review-log")).text
    before = await counts(nats_bus)

    report_file = tmp_path / "shadow.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DESK_", "LLM_"))}
    with FakeLLM() as llm:  # a candidate that writes what the reviewer sent
        llm.responder = lambda body: {**default_responder(body), "reply": SENT, "sources": []}
        run = await asyncio.to_thread(
            subprocess.run,
            [
                *(sys.executable, "-m", "desk", "shadow", "--since", "10m", "--url", api.url),
                *("--token", "viewer-token-for-tests", "--json", str(report_file)),
                *("--model", "candidate-2"),
            ],
            env=env
            | {
                "DESK_NATS_URL": nats_bus.nc.connected_url.geturl(),  # type: ignore[union-attr]
                "DESK_VAR_DIR": str(tmp_path / "var"),
                "DESK_LLM_BASE_URL": llm.url,
                "DESK_LLM_API_KEY": "k",
            },
            capture_output=True,
            text=True,
            timeout=120,
        )
        asked = [r["model"] for r in llm.requests]
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    assert "nothing was sent or decided" in run.stdout
    assert stat.S_IMODE(report_file.stat().st_mode) == 0o600  # customers' text: owner only
    report = json.loads(report_file.read_text())
    [mine] = [r for r in report["rounds"] if r["ticket"] == ticket]
    assert (mine["decision"], mine["sent"], mine["live_category"]) == ("edit", SENT, "refund")
    assert mine["reply"] and mine["error"] is None
    assert mine["like_sent"] == 1.0 and 0 < mine["live_like_sent"] < 1  # side by side
    assert "candidate-2" in asked and report["model"] == "candidate-2"
    assert "like the sent reply" in run.stdout and "candidate-2" in run.stdout
    assert report["events"] >= 1 and report["summary"]["with_sent_reply"] >= 1

    assert await counts(nats_bus) == before  # no decision, no item, no result published
    async with api.client() as client:
        assert (await client.get("/api/review-log")).text == log_before  # nothing decided
