"""`desk report` against a real stack slice: inbox_api, nats-server, a chat webhook."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from markdown_it import MarkdownIt

from desk.natsserver import NatsServer
from services.reconciler.report import post_to_slack, render
from shared import subjects
from shared.bus import Bus
from shared.chat import JOINER, quote_lines
from shared.consumer import ConsumerRuntime
from shared.envelope import Envelope
from shared.errors import PermanentError
from standins.channel import FakeChannel
from tests.helpers import eventually, messages
from tests.inbox_items import draft_item, publish_item
from tests.services.inbox_api.conftest import REPORTER, REVIEWER, write_credentials
from tests.services.shared_consumer import consumer_for
from tests.services_running import ROOT, ServiceProcess


async def test_the_report_lists_a_dead_letter_and_the_oldest_waiting_item(
    bus: Bus, nats_server: NatsServer, tmp_path: Path, fake_channel: FakeChannel
) -> None:
    write_credentials(tmp_path / "var")
    env = {"DESK_NATS_URL": nats_server.url, "DESK_VAR_DIR": str(tmp_path / "var")}
    inbox = ServiceProcess(["inbox_api"], env, tmp_path / "inbox.log").start()
    try:
        await publish_item(bus, draft_item("T1012"))
        await publish_item(bus, draft_item("T1041"))
        headers = {"Authorization": f"Bearer {REVIEWER}"}

        def listed() -> bool:
            return len(httpx.get(f"{inbox.url}/api/items", headers=headers).json()["items"]) == 2

        await eventually(listed, timeout=15, message="two items in the inbox")

        async def fail(delivery: object) -> None:
            raise PermanentError("ticket T9999 does not exist in the source system")

        runtime = ConsumerRuntime(bus, "drafter", consumer_for(fail))
        await runtime.start()
        await bus.publish(
            subjects.work("test", "ticket.created"),
            Envelope(source="t", type="t", data={}).to_bytes(),
            msg_id="w-9999",
        )
        await eventually(lambda: messages(bus.js, subjects.DLQ), message="a dead letter")
        await runtime.stop(timeout=5)

        clean = {k: v for k, v in os.environ.items() if not k.startswith("DESK_")}
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "desk", "report"],
            cwd=ROOT,
            env={
                **clean,
                **env,
                "DESK_INBOX_URL": inbox.url,
                "DESK_REPORT_TOKEN": REPORTER,
                "DESK_SLACK_WEBHOOK_URL": fake_channel.url,
            },
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert "Oldest waiting: T1012~v1" in done.stdout
        assert "T9999 does not exist" in done.stdout
        assert "Dead letters: 1" in done.stdout
        assert "Review, last 24 h: no decisions" in done.stdout  # the inbox's analytics, 24 h
        assert "Cost of drafts: $" in done.stdout and "(2 drafts)" in done.stdout  # counted
        [posted] = fake_channel.requests
        assert json.loads(posted["body"])["text"] == quote_lines(done.stdout.strip(), "slack")

        # a token the inbox does not know: the report says which answer it got
        refused = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "desk", "report"],
            cwd=ROOT,
            env={**clean, **env, "DESK_INBOX_URL": inbox.url, "DESK_REPORT_TOKEN": "not-a-token"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert refused.returncode == 0, refused.stderr
        assert "Inbox: unavailable (HTTP 401)" in refused.stdout
        [report] = [
            Envelope.model_validate_json(m.data) for m in await messages(bus.js, subjects.RESULTS)
        ]
        assert report.type == "report.daily"
        assert report.data["inbox"]["stats"]["oldest_waiting"]["id"] == "T1012~v1"
        assert report.data["inbox"]["stats"]["review"]["days"] == 1
    finally:
        inbox.stop()


def a_report(stats: dict[str, Any]) -> dict[str, Any]:
    return {
        "date": "2026-12-01",
        "period_hours": 24,
        "events": {},
        "results": {},
        "dead_letters": [],
        "inbox": {"stats": stats, "cost_usd": 0.0, "drafts": 0},
    }


def figures(decisions: int, unedited: float | None, median: float | None, **kinds: int) -> Any:
    return {
        "decisions": decisions,
        **{k: kinds.get(k, 0) for k in ("accept", "edit", "response", "ignore")},
        "unedited_share": unedited,
        "time_to_decision_seconds": {"median": median, "p90": median},
    }


def test_the_report_gives_the_day_s_review_figures_and_per_category() -> None:
    stats = {
        "by_status": {"waiting": 1},
        "oldest_waiting": None,
        "review": {
            "days": 1,
            "overall": figures(5, 0.6667, 4500, accept=2, edit=1, response=1, ignore=1),
            "by_category": {
                "refund": figures(3, 0.6667, 5400, accept=2, edit=1),
                "escalation": figures(1, None, 30, ignore=1),
                "quiet": figures(0, None, None),
            },
        },
    }
    lines = render(a_report(stats)).splitlines()
    assert (
        "Review, last 24 h: 5 decisions (accept 2, edit 1, response 1, ignore 1); "
        "sent unedited 67 %; median time to decision 1 h 15 min"
    ) in lines
    assert (
        "  by category: escalation 1, median 30 s; refund 3, unedited 67 %, median 1 h 30 min"
        in lines
    )


def test_the_report_of_an_inbox_without_review_figures_leaves_them_out() -> None:
    older = render(a_report({"by_status": {"waiting": 1}, "oldest_waiting": None}))
    assert "Inbox: waiting 1" in older and "Review" not in older
    odd = render(a_report({"by_status": {}, "review": {"days": 1, "overall": "?"}}))
    assert "Review" not in odd and "Cost of drafts" in odd
    quiet = {"days": 7, "overall": figures(0, None, None), "by_category": {}}
    assert "Review, last 7 days: no decisions" in render(
        a_report({"by_status": {}, "review": quiet})
    )


HOSTILE = (
    "ticket *bold* _x_ `c` @channel <!channel> <@U024BE7LH> [click](https://evil.example/r) "
    "![](https://evil.example/p.png) evil-support.com/login"
)


@pytest.mark.parametrize("flavour", ["slack", "mattermost"])
async def test_every_line_of_the_posted_report_is_inert(
    fake_channel: FakeChannel, flavour: str
) -> None:
    report = a_report({"by_status": {"waiting": 1}, "oldest_waiting": None})
    letter = {"id": 7, "service": "drafter", "subject": "work.drafter.x", "attempts": 1}
    report["dead_letters"] = [{**letter, "error": HOSTILE}]
    report["events"] = {"<!here> *x*": 1}
    assert await post_to_slack(fake_channel.url, render(report), flavour)  # type: ignore[arg-type]

    [posted] = fake_channel.requests
    body = json.loads(posted["body"])
    text = body["text"]
    assert not re.search(r"(?i)@(?:channel|all|here)\b|<[!@]", text), text
    assert not re.search(r"(?i)\bhttps?://|\b[\w-]+\.(?:example|com)\b", text), text
    if flavour == "slack":
        assert (body["unfurl_links"], body["unfurl_media"]) == (False, False)
        assert not set("<>*_~`") & set(text), text
    else:
        html = MarkdownIt("commonmark").enable(["strikethrough", "table"]).render(text)
        for tag in ("<a", "<img", "<strong", "<em", "<s>", "<code", "<!", "<h", "<ul", "<ol"):
            assert tag not in html, html
    lines = text.replace(JOINER, "").splitlines()
    assert len(lines) == len(render(report).splitlines())  # line by line, none added or lost
    assert "@channel" in text.replace(JOINER, "")  # quoted, not dropped


async def test_the_report_token_reads_counts_and_no_conversation(
    nats_server: NatsServer, bus: Bus, tmp_path: Path
) -> None:
    """The reconciler's token, leaked or misused, asks the inbox for what a reviewer sees."""
    write_credentials(tmp_path / "var")
    env = {"DESK_NATS_URL": nats_server.url, "DESK_VAR_DIR": str(tmp_path / "var")}
    inbox = ServiceProcess(["inbox_api"], env, tmp_path / "inbox.log").start()
    try:
        await publish_item(bus, draft_item("T1012"))
        as_reviewer = {"Authorization": f"Bearer {REVIEWER}"}

        def listed() -> bool:
            items = httpx.get(f"{inbox.url}/api/items", headers=as_reviewer).json()["items"]
            return len(items) == 1

        await eventually(listed, timeout=15, message="the item in the inbox")
        as_report = {"Authorization": f"Bearer {REPORTER}"}
        async with httpx.AsyncClient(base_url=inbox.url, headers=as_report) as client:
            for path in (
                "/api/items/T1012~v1",
                "/api/items",
                "/api/deadletters",
                "/api/review-log",
            ):
                refused = await client.get(path)
                assert refused.status_code == 403, (path, refused.text)
                assert "T1012" not in refused.text
            stats = await client.get("/api/stats", params={"days": 1})
            assert stats.status_code == 200, stats.text
            assert stats.json()["by_status"]["waiting"] == 1
            assert stats.json()["drafts"]["count"] == 1
            login = await client.post(
                "/login", data={"token": REPORTER}, headers={"Origin": inbox.url}
            )
            assert login.status_code == 401 and "set-cookie" not in login.headers
    finally:
        inbox.stop()
