"""`desk inbox` against a real inbox_api process and a real nats-server.

Items reach the inbox the real way: `inbox.item` envelopes on NATS, as the drafter emits them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from desk.inbox import add_arguments, main, render_item, render_table
from desk.natsserver import NatsServer
from desk.process import free_port
from shared import subjects
from shared.bus import Bus
from shared.envelope import Envelope, decode
from shared.helpdesk.base import Customer, Message
from shared.inbox import (
    DRAFT_CONFIG,
    NOTIFY_CONFIG,
    NOTIFY_SUPERVISOR,
    SEND_REPLY,
    ActionRequest,
    Cost,
    InboxItem,
    Trigger,
    item_id,
)
from tests.helpers import eventually, messages
from tests.inbox_items import REFUND_CITATION, publish_item
from tests.services_running import ServiceProcess

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)

REVIEWER, VIEWER = "r-token", "v-token"
DRAFT_ID, NOTIFY_ID = item_id("T1012", 1), item_id("T1013", 1)
REPLY = "Hello Ada,\nyour refund of 42 EUR was issued today."
START = dt.datetime(2026, 11, 30, 9, tzinfo=dt.UTC)
CONVERSATION = [
    Message(
        id=f"T1012-m{n}",
        author=author,  # type: ignore[arg-type]
        author_name=name,
        body=body,
        created_at=START + dt.timedelta(minutes=10 * n),
    )
    for n, (author, name, body) in enumerate(
        [
            ("customer", "Ada Lovelace", "I was charged twice for order 881."),
            ("agent", "Sam from Support", "Sorry! I asked billing to refund one charge."),
            ("note", "Sam from Support", "Billing says: refunded Monday."),
            ("customer", "Ada Lovelace", "Thanks, but the refund\nhas not arrived yet."),
        ],
        start=1,
    )
]


def draft_item() -> InboxItem:
    """A normal draft, shaped as services/drafter/graph/nodes.py `draft` builds it."""
    return InboxItem(
        action_request=ActionRequest(
            action=SEND_REPLY,
            args={"ticket_id": "T1012", "subject": "Re: Refund for order 881", "reply": REPLY},
        ),
        config=DRAFT_CONFIG,
        description="Ticket T1012 from Ada Lovelace: asks where her refund is.",
        id=DRAFT_ID,
        thread="T1012",
        version=1,
        ticket_id="T1012",
        category="billing",
        summary="Customer asks about the status of a refund for order 881",
        trigger=Trigger(source="helpdesk", type="ticket.created", event_id="evt_1012"),
        created_at=dt.datetime.now(dt.UTC) - dt.timedelta(minutes=4),
        cost=Cost(input_tokens=1200, output_tokens=180, usd=0.00123),
        warnings=["the reply mentions an amount"],
        round="T1012-m4",
        round_messages=["T1012-m4"],
        conversation=CONVERSATION,
        customer=Customer(id="C7", name="Ada Lovelace", email="ada@example.com"),
        ticket_status="open",
        priority="urgent",
        citations=[REFUND_CITATION],
        instructions=["Say refunds take 5 business days."],
        examples=["T1001/T1001-m1"],
    )


def notify_item() -> InboxItem:
    """An escalation, shaped as nodes.py `notify` builds it: only ignore is allowed."""
    return InboxItem(
        action_request=ActionRequest(
            action=NOTIFY_SUPERVISOR,
            args={"ticket_id": "T1013", "reason": "escalation words", "matched": ["lawyer"]},
        ),
        config=NOTIFY_CONFIG,
        description="Ticket T1013 from Bob mentions lawyer. No reply was drafted.",
        id=NOTIFY_ID,
        thread="T1013",
        version=1,
        ticket_id="T1013",
        category="escalation",
        summary="Escalation: I will call my lawyer",
        trigger=Trigger(source="helpdesk", type="ticket.created", event_id="evt_1013"),
        created_at=dt.datetime.now(dt.UTC) - dt.timedelta(hours=2),
    )


async def emit(bus: Bus, item: InboxItem) -> None:
    """Publish an item exactly as the drafter does."""
    await publish_item(bus, item)


@dataclass
class Inbox:
    url: str
    bus: Bus
    var_dir: Path

    def run(self, *argv: str, token: str = REVIEWER, url: str | None = None) -> int:
        args = parse("inbox", "--url", url or self.url, "--token", token, *argv)
        return main(args, self.var_dir)

    async def decisions(self) -> list[Envelope]:
        found = await messages(self.bus.js, subjects.INBOX)
        return [decode(m.data) for m in found if m.subject == subjects.INBOX_DECISION and m.data]


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="desk")
    add_arguments(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(list(argv))


@pytest.fixture
async def inbox(
    nats_server: NatsServer, bus: Bus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Inbox]:
    monkeypatch.delenv("DESK_INBOX_URL", raising=False)
    monkeypatch.delenv("DESK_TOKEN", raising=False)
    var_dir = tmp_path / "var"
    var_dir.mkdir()
    (var_dir / "dev-credentials.json").write_text(
        json.dumps({"webhook_secrets": {}, "reviewer_token": REVIEWER, "viewer_token": VIEWER})
    )
    env = {"DESK_NATS_URL": nats_server.url, "DESK_VAR_DIR": str(var_dir)}
    service = ServiceProcess(["inbox_api"], env, tmp_path / "inbox_api.log").start()
    try:
        await emit(bus, draft_item())
        await emit(bus, notify_item())

        def listed() -> bool:
            answer = httpx.get(
                f"{service.url}/api/items",
                headers={"Authorization": f"Bearer {REVIEWER}"},
                timeout=2,
            )
            return answer.status_code == 200 and len(answer.json()["items"]) == 2

        await eventually(listed, message="both items in the inbox API")
        yield Inbox(service.url, bus, var_dir)
    finally:
        service.stop()


async def test_list_shows_both_items_in_a_table(
    inbox: Inbox, capsys: pytest.CaptureFixture[str]
) -> None:
    assert inbox.run("list") == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    header = ["ID", "AGE", "STATUS", "PRIORITY", "CATEGORY", "TICKET", "SUMMARY"]
    assert lines[0].split() == header
    draft = next(line for line in lines if line.startswith(DRAFT_ID))
    notify = next(line for line in lines if line.startswith(NOTIFY_ID))
    assert draft.split()[1:6] == ["4m", "waiting", "urgent", "billing", "T1012"]
    assert notify.split()[1:6] == ["2h", "waiting", "-", "escalation", "T1013"]
    assert "Customer asks about the status" in draft
    assert "2 shown" in out
    assert all(len(line) <= 100 for line in lines)
    assert REVIEWER not in out


async def test_show_prints_the_item_with_its_draft_reply(
    inbox: Inbox, capsys: pytest.CaptureFixture[str]
) -> None:
    assert inbox.run("show", DRAFT_ID) == 0
    out = capsys.readouterr().out
    assert "your refund of 42 EUR was issued today." in out
    assert "Hello Ada," in out
    assert "Ticket T1012 from Ada Lovelace" in out  # description
    assert "the reply mentions an amount" in out  # warnings
    assert "1200 tokens in, 180 out" in out  # cost
    assert "accept, edit, respond, ignore" in out
    assert "decisions: none yet" in out


async def test_show_prints_the_customer_the_ticket_and_the_conversation_before_the_draft(
    inbox: Inbox, capsys: pytest.CaptureFixture[str]
) -> None:
    assert inbox.run("show", DRAFT_ID) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "customer: Ada Lovelace <ada@example.com>" in lines
    assert "ticket:   T1012 (open)" in lines  # no DESK_HELPDESK_TICKET_URL: no link
    assert "priority: urgent" in lines
    assert not any(line.startswith(("overdue:", "notified:")) for line in lines)
    start = lines.index("conversation (4 messages, newest last; > marks what this draft answers):")
    assert lines[start + 1 : start + 9] == [
        "  customer  Ada Lovelace  2026-11-30 09:10:00 UTC",
        "    I was charged twice for order 881.",
        "  agent  Sam from Support  2026-11-30 09:20:00 UTC",
        "    Sorry! I asked billing to refund one charge.",
        "  internal note  Sam from Support  2026-11-30 09:30:00 UTC",
        "    Billing says: refunded Monday.",
        "> customer  Ada Lovelace  2026-11-30 09:40:00 UTC  (this draft answers)",
        "    Thanks, but the refund",
    ]
    assert lines[start + 9] == "    has not arrived yet."
    assert start < lines.index("draft reply:")  # the conversation, then the draft
    assert lines[lines.index("draft reply:") + 1] == "  Hello Ada,"
    sources = lines.index("knowledge this draft relies on:")  # beside the draft, after it
    assert lines[sources + 1 : sources + 3] == [
        "  refunds: Refunds and how long they take · How long a refund takes  "
        "https://help.example.com/refunds",
        "    Once we confirm a refund it is processed within 5 business days.",
    ]
    learned = lines.index("standing instructions for billing it was given:")
    assert lines[learned + 1 : learned + 3] == [
        "  - Say refunds take 5 business days.",
        "replies reviewers sent that it was shown: T1001/T1001-m1",
    ]


async def test_list_filters_by_priority_and_sorts_urgent_first(
    inbox: Inbox, capsys: pytest.CaptureFixture[str]
) -> None:
    assert inbox.run("list", "--priority", "urgent") == 0
    out = capsys.readouterr().out
    assert DRAFT_ID in out and NOTIFY_ID not in out
    assert inbox.run("list", "--sort", "priority") == 0
    rows = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:3]]
    assert rows == [DRAFT_ID, NOTIFY_ID]  # urgent first, though the escalation is older
    assert inbox.run("list", "--sort", "oldest") == 0
    rows = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:3]]
    assert rows == [NOTIFY_ID, DRAFT_ID]
    with pytest.raises(SystemExit):
        parse("inbox", "list", "--priority", "whenever")


async def test_accept_publishes_a_decision_and_a_different_second_decision_gets_409(
    inbox: Inbox, capsys: pytest.CaptureFixture[str]
) -> None:
    assert inbox.run("accept", DRAFT_ID) == 0
    assert capsys.readouterr().out.strip() == f"accepted {DRAFT_ID}"

    async def published() -> bool:
        return len(await inbox.decisions()) == 1

    await eventually(published, message="an inbox.decision on the INBOX stream")
    decision = (await inbox.decisions())[0].data
    assert decision["type"] == "accept"
    assert (decision["item_id"], decision["version"]) == (DRAFT_ID, 1)
    assert decision["reviewer"] == "reviewer"

    assert inbox.run("accept", DRAFT_ID) == 0  # run again: the accept stands, nothing more
    assert capsys.readouterr().out.strip() == f"accepted {DRAFT_ID}"
    assert inbox.run("ignore", DRAFT_ID) != 0
    err = capsys.readouterr().err.strip()
    assert err == "desk inbox ignore: 409 this item is sending, not waiting for a decision"
    assert len(await inbox.decisions()) == 1

    assert inbox.run("show", DRAFT_ID) == 0
    out = capsys.readouterr().out
    assert "accept by reviewer" in out
    assert "status:   sending (accept)" in out


async def test_accept_on_a_notify_item_is_refused_with_422(
    inbox: Inbox, capsys: pytest.CaptureFixture[str]
) -> None:
    assert inbox.run("accept", NOTIFY_ID) != 0
    assert capsys.readouterr().err.strip() == (
        "desk inbox accept: 422 accept is not allowed on this item"
    )
    assert inbox.run("ignore", NOTIFY_ID) == 0
    assert capsys.readouterr().out.strip() == f"ignored {NOTIFY_ID}"


async def test_edit_publishes_the_new_reply(
    inbox: Inbox, capsys: pytest.CaptureFixture[str]
) -> None:
    assert inbox.run("edit", DRAFT_ID, "Hi Ada, the refund is on its way.") == 0
    assert capsys.readouterr().out.strip() == f"edited {DRAFT_ID}"

    async def published() -> bool:
        return len(await inbox.decisions()) == 1

    await eventually(published, message="the edit on the INBOX stream")
    decision = (await inbox.decisions())[0].data
    assert decision["type"] == "edit"
    assert decision["args"]["action"] == SEND_REPLY
    assert decision["args"]["args"] == {
        "ticket_id": "T1012",
        "subject": "Re: Refund for order 881",
        "reply": "Hi Ada, the refund is on its way.",
    }


async def test_respond_with_empty_text_is_refused_with_422(
    inbox: Inbox, capsys: pytest.CaptureFixture[str]
) -> None:
    assert inbox.run("respond", DRAFT_ID, "  ") != 0
    assert capsys.readouterr().err.strip() == ("desk inbox respond: 422 feedback must not be empty")
    assert inbox.run("respond", DRAFT_ID, "Mention the 5-day bank delay.") == 0
    assert capsys.readouterr().out.strip() == f"sent feedback on {DRAFT_ID}"


async def test_a_viewer_token_may_read_but_not_decide(
    inbox: Inbox, capsys: pytest.CaptureFixture[str]
) -> None:
    assert inbox.run("list", token=VIEWER) == 0
    capsys.readouterr()
    assert inbox.run("accept", DRAFT_ID, token=VIEWER) != 0
    captured = capsys.readouterr()
    assert captured.err.strip() == (
        "desk inbox accept: 403 this token may read the inbox but not decide"
    )
    assert VIEWER not in captured.out + captured.err
    assert await inbox.decisions() == []


async def test_wrong_token_and_unknown_item(
    inbox: Inbox, capsys: pytest.CaptureFixture[str]
) -> None:
    assert inbox.run("list", token="not-a-token") == 1
    captured = capsys.readouterr()
    assert captured.err.strip() == (
        "desk inbox list: 401 this token is not a reviewer's (unknown, or removed from "
        "DESK_REVIEWERS)"
    )
    assert "not-a-token" not in captured.out + captured.err
    assert inbox.run("show", "T9999~v1") == 1
    assert capsys.readouterr().err.strip() == "desk inbox show: 404 no such item"


async def test_an_unreachable_api_fails_with_a_clear_message(
    inbox: Inbox, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    assert inbox.run("accept", DRAFT_ID, url=url) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"desk inbox accept: cannot reach the inbox API at {url}")
    assert REVIEWER not in captured.err
    assert len(captured.err.strip().splitlines()) == 1


# -- without a service -------------------------------------------------------------------------


def test_url_and_token_are_accepted_before_or_after_the_sub_command() -> None:
    before = parse("inbox", "--url", "http://a", "--token", "t1", "list")
    after = parse("inbox", "list", "--url", "http://b", "--token", "t2")
    assert (before.url, before.token, before.status) == ("http://a", "t1", "waiting")
    assert (after.url, after.token) == ("http://b", "t2")
    assert parse("inbox", "list", "--all").all is True


def test_defaults_come_from_the_running_stack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("DESK_INBOX_URL", raising=False)
    monkeypatch.delenv("DESK_TOKEN", raising=False)
    assert main(parse("inbox", "list"), tmp_path) == 2
    assert capsys.readouterr().err.strip() == (
        "desk inbox list: no running stack found; pass --url or set DESK_INBOX_URL"
    )
    creds = tmp_path / "dev-credentials.json"
    creds.write_text(json.dumps({"reviewer_token": "secret-token"}))
    url = f"http://127.0.0.1:{free_port()}"
    (tmp_path / "stack.json").write_text(
        json.dumps({"credentials": str(creds), "services": {"inbox_api": {"url": url}}})
    )
    assert main(parse("inbox", "list"), tmp_path) == 1  # found the URL, nobody answers
    err = capsys.readouterr().err
    assert url in err and "secret-token" not in err


def test_the_table_marks_overdue_items_and_the_show_output_its_notifications() -> None:
    now = dt.datetime(2025, 1, 2, tzinfo=dt.UTC)
    item = {
        "id": "T1~v1",
        "created_at": "2025-01-01T00:00:00+00:00",
        "status": "waiting",
        "priority": "high",
        "category": "other",
        "ticket_id": "T1",
        "summary": "Where is my parcel",
        "overdue_since": "2025-01-02",
    }
    row = render_table([item], now).splitlines()[1]
    assert row.split()[2:4] == ["waiting", "high"]
    assert row.endswith("[overdue since 2025-01-02] Where is my parcel")
    shown = render_item(
        {
            **item,
            "version": 1,
            "thread": "T1",
            "status": "withdrawn",
            "withdrawn_reason": "the ticket was closed",
            "ticket_url": "https://helpdesk.example.com/t/T1",
            "notifications": [
                {"type": "notify.sent", "channel": "slack", "at": "2025-01-01T10:00:00+00:00"},
                {"type": "notify.failed", "channel": "log", "at": "2025-01-01T11:00:00+00:00"},
            ],
        },
        now,
    ).splitlines()
    assert "status:   withdrawn: the ticket was closed" in shown
    assert "ticket:   T1 https://helpdesk.example.com/t/T1" in shown
    assert "overdue:  since 2025-01-02" in shown
    assert "notified: a supervisor, via slack at 2025-01-01 10:00:00 UTC" in shown
    assert "notified: FAILED to notify a supervisor, via log at 2025-01-01 11:00:00 UTC" in shown
    assert "conversation: none recorded" in shown


def test_the_table_cuts_long_summaries_to_fit() -> None:
    now = dt.datetime(2025, 1, 2, tzinfo=dt.UTC)
    table = render_table(
        [
            {
                "id": "T1~v1",
                "created_at": "2025-01-01T00:00:00+00:00",
                "status": "waiting",
                "category": "other",
                "ticket_id": "T1",
                "summary": "word " * 60 + "\x1b[31m",
            }
        ],
        now,
    )
    row = table.splitlines()[1]
    assert row.split()[:2] == ["T1~v1", "1d"]
    assert len(row) <= 100 and row.endswith("…")
    assert "\x1b" not in table


async def test_show_piped_into_a_reader_that_went_away_ends_quietly(inbox: Inbox) -> None:
    """`desk inbox show X | head -1`: the reader is gone before the output is written (its end
    of the pipe closed first, so every write fails); one exit, no BrokenPipeError."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("DESK_")}
    desk = [sys.executable, "-m", "desk"]
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone
    try:
        done = subprocess.run(
            [*desk, "inbox", "--url", inbox.url, "--token", REVIEWER, "show", DRAFT_ID],
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=env,
            cwd=Path(__file__).resolve().parents[2],
            timeout=30,
        )
    finally:
        os.close(write_end)
    assert done.stderr == b"", done.stderr.decode()
    assert done.returncode == 1
