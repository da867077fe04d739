"""Standing instructions against a real inbox_api process and nats-server, on SQLite and on
PostgreSQL: feedback that recurs across tickets of a category becomes a visible instruction,
published to the drafter; reviewers edit and remove it (viewers may not), and a removed one is
not learned again."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import yaml

from shared import guidance
from shared.bus import Bus
from tests.helpers import eventually
from tests.inbox_items import conversation, draft_item

from .conftest import VIEWER, Api
from .test_api import waiting
from .test_web import csrf_of, log_in

FIVE_DAYS = "Always mention the 5-day processing time."


def ticket() -> str:
    return f"T{uuid.uuid4().hex[:8]}"


async def respond(api: Api, bus: Bus, feedback: str, category: str = "refund") -> str:
    item = draft_item(ticket(), category=category)
    await waiting(api, bus, item)
    async with api.client() as client:
        answer = await client.post(
            f"/api/items/{item.id}/decision",
            json={"type": "response", "args": feedback, "version": 1},
        )
    assert answer.status_code == 202, answer.text
    return str(item.ticket_id)


async def standing(api: Api, *, removed: bool = False) -> list[dict[str, Any]]:
    async with api.client() as client:
        answer = await client.get("/api/instructions", params={"removed": "1"} if removed else {})
    assert answer.status_code == 200, answer.text
    found: list[dict[str, Any]] = answer.json()["instructions"]
    return found


async def drafter_sees(bus: Bus, texts: list[str]) -> bool:
    return [i.text for i in (await guidance.read(bus.js)).instructions] == texts


async def test_recurring_feedback_becomes_a_standing_instruction_reviewers_can_change(
    api: Api, nats_bus: Bus
) -> None:
    first = await respond(api, nats_bus, FIVE_DAYS)
    await respond(api, nats_bus, "Make it warmer.", category="billing")
    assert await standing(api) == []  # said once: only feedback on that draft

    second = await respond(api, nats_bus, "please always mention the 5 day processing time")
    [learned] = await standing(api)
    assert (learned["category"], learned["origin"], learned["status"]) == (
        "refund",
        "learned",
        "active",
    )
    assert learned["text"] == "please always mention the 5 day processing time"
    assert learned["tickets"] == sorted([first, second])
    assert [e["feedback"] for e in learned["evidence"]] == [FIVE_DAYS, learned["text"]]
    await eventually(
        lambda: drafter_sees(nats_bus, [learned["text"]]), message="published to the drafter"
    )

    path = f"/api/instructions/{learned['id']}"
    async with api.client(VIEWER) as viewer:
        assert (await viewer.patch(path, json={"text": "x"})).status_code == 403
        assert (await viewer.delete(path)).status_code == 403
    async with api.client() as client:
        edited = await client.patch(path, json={"text": "  Say refunds take 5 business days. "})
        assert edited.status_code == 200, edited.text
        assert (edited.json()["text"], edited.json()["updated_by"]) == (
            "Say refunds take 5 business days.",
            "reviewer",
        )
        assert (await client.patch(path, json={"text": ""})).status_code == 422
        assert (await client.patch(path, content=b"{nope")).status_code == 400
        assert (await client.patch("/api/instructions/abc", json={"text": "x"})).status_code == 404
        await eventually(
            lambda: drafter_sees(nats_bus, ["Say refunds take 5 business days."]),
            message="the edit published",
        )
        assert (await client.delete(path)).status_code == 200
        assert (await client.delete(path)).status_code == 404  # removed already
    await eventually(lambda: drafter_sees(nats_bus, []), message="the removal published")
    assert await standing(api) == []
    assert [i["status"] for i in await standing(api, removed=True)] == ["removed"]

    # the same feedback again on a third ticket: reviewers removed it, it does not come back
    await respond(api, nats_bus, "Always mention the five day processing time, 5-day.")
    assert await standing(api) == []

    async with api.client() as client:
        written = await client.post(
            "/api/instructions", json={"category": "billing", "text": "Name the last 4 digits."}
        )
        assert written.status_code == 201, written.text
        assert written.json()["origin"] == "written"
        refused = await client.post("/api/instructions", json={"category": "x", "text": "y"})
        assert refused.status_code == 422 and "category must be one of" in refused.text
    await eventually(
        lambda: drafter_sees(nats_bus, ["Name the last 4 digits."]), message="written published"
    )
    async with api.client() as client:  # tidy for the page test: nothing active
        assert (await client.delete(f"/api/instructions/{written.json()['id']}")).is_success


async def test_the_instructions_page_shows_them_and_its_forms_change_them(
    api: Api, nats_bus: Bus
) -> None:
    async with api.client() as client:
        made = await client.post(
            "/api/instructions", json={"category": "invoice", "text": "Attach <the> PDF."}
        )
    row = made.json()
    async with httpx.AsyncClient(base_url=api.url, timeout=10) as browser:
        csrf = await log_in(browser, VIEWER)
        page = (await browser.get("/instructions")).text
        assert "Attach &lt;the&gt; PDF." in page and "Written by a reviewer" in page
        assert "<textarea" not in page  # a viewer reads only
        refused = await browser.post(f"/instructions/{row['id']}", data={"csrf": csrf})
        assert refused.status_code == 403

    async with httpx.AsyncClient(base_url=api.url, timeout=10) as browser:
        csrf = await log_in(browser, "reviewer-token-for-tests")
        page = (await browser.get("/instructions")).text
        assert f'id="text-{row["id"]}"' in page
        form = {"csrf": csrf, "text": "Attach the invoice PDF.", "action": "save"}
        saved = await browser.post(f"/instructions/{row['id']}", data=form)
        assert (saved.status_code, saved.headers["location"]) == (303, "/instructions")
        page = (await browser.get("/instructions")).text
        assert "Instruction saved for invoice" in page and "Attach the invoice PDF." in page
        removed = await browser.post(
            f"/instructions/{row['id']}", data={"csrf": csrf, "action": "remove"}
        )
        assert removed.status_code == 303
        assert "Attach the invoice PDF." not in (await browser.get("/instructions")).text
        bad = await browser.post("/instructions/999999", data={"csrf": csrf, "text": "x"})
        assert bad.status_code == 404
        csrf = csrf_of((await browser.get("/instructions")).text)
        added = await browser.post(
            "/instructions", data={"csrf": csrf, "category": "nope", "text": "x"}
        )
        assert added.status_code == 422

        # a draft given instructions and examples says so beside the reply
        item = draft_item(ticket()).model_copy(
            update={"instructions": ["Mention the 5-day processing time."], "examples": ["T9/r1"]}
        )
        await waiting(api, nats_bus, item)
        shown = (await browser.get(f"/items/{item.id}")).text
        learned = shown.split('id="learned"', 1)[1].split("</aside>", 1)[0]
        assert "Mention the 5-day processing time." in learned and "T9/r1" in learned
        assert 'href="/instructions#category-refund"' in learned


async def test_desk_eval_turns_the_replies_reviewers_sent_into_cases(
    api: Api, nats_bus: Bus, tmp_path: Path
) -> None:
    thread = ticket()
    said = conversation(
        thread,
        ("customer", "My refund has not arrived."),
        ("agent", "It is on its way."),
        ("customer", "Still nothing after a week. When will it arrive?"),
    )
    item = draft_item(thread, conversation=said).model_copy(
        update={"round_messages": [said[2].id], "round": said[2].id}
    )
    ignored = draft_item(ticket())
    await waiting(api, nats_bus, item, ignored)
    sent = "Hi Jane, refunds are processed within 5 business days. The Support Team"
    async with api.client() as client:
        for decided, body in (
            (item, {"type": "edit", "args": sent, "version": 1}),
            (ignored, {"type": "ignore", "version": 1}),
        ):
            answer = await client.post(f"/api/items/{decided.id}/decision", json=body)
            assert answer.status_code == 202, answer.text
    written = tmp_path / "from-log.yaml"
    run = await asyncio.to_thread(
        subprocess.run,
        [
            *(sys.executable, "-m", "desk", "eval", "--from-review-log", "--url", api.url),
            *("--token", VIEWER, "--write", str(written), "--json", str(tmp_path / "r.json")),
        ],
        env={k: v for k, v in os.environ.items() if not k.startswith("DESK_")}
        | {"DESK_VAR_DIR": str(tmp_path / "var")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "cases from the review log written to" in run.stdout, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    cases = {c["id"]: c for c in yaml.safe_load(written.read_text())["cases"]}
    case = cases[f"{thread}-{item.round}"]
    assert ignored.ticket_id not in {c.split("-")[0] for c in cases}  # nothing was sent
    assert case["reference"] == sent and case["category"] == "refund"
    assert [m["from"] for m in case["messages"]] == ["customer", "agent", "customer"]
    report = json.loads((tmp_path / "r.json").read_text())
    [scored] = [c for c in report["cases"] if c["id"] == case["id"]]
    assert 0 < scored["similarity"] <= 1  # each draft compared with what was sent
