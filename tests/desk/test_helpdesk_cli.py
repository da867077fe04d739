"""`desk helpdesk create|message|close` as a user runs them: real processes, a real SQLite
helpdesk, and for the webhooks a real ingress publishing to a real nats-server."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from desk.natsserver import NatsServer
from desk.process import free_port
from shared import subjects
from shared.bus import Bus
from shared.helpdesk import Ticket
from shared.helpdesk.sql import SqlSource
from tests import forkserver
from tests.helpers import messages
from tests.services_running import ROOT, ServiceProcess

SECRET = "whsec_" + base64.b64encode(b"helpdesk-cli-test-secret-32byte!").decode()


def desk(var_dir: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DESK_")}
    return forkserver.run(
        ["helpdesk", *args], env={**clean, "DESK_VAR_DIR": str(var_dir), **env}, cwd=ROOT
    )


def read(var_dir: Path, ticket_id: str) -> Ticket:
    source = SqlSource(f"sqlite:///{var_dir / 'helpdesk.sqlite'}")
    try:
        return asyncio.run(source.get_ticket(ticket_id))
    finally:
        source.engine.dispose()


def fake_stack(var_dir: Path, ingress_url: str, secret: str = SECRET) -> None:
    """The two files `desk up` writes that the helpdesk commands read: where ingress listens,
    and the development webhook secrets."""
    var_dir.mkdir(parents=True, exist_ok=True)
    credentials = var_dir / "dev-credentials.json"
    credentials.write_text(json.dumps({"webhook_secrets": {"helpdesk": secret}}))
    state = {"services": {"ingress": {"url": ingress_url}}, "credentials": str(credentials)}
    (var_dir / "stack.json").write_text(json.dumps(state))


def test_desk_helpdesk_create_adds_a_ticket_to_the_demo_helpdesk(tmp_path: Path) -> None:
    args = [
        "--customer",
        "new.customer@example.com",
        "--subject",
        "Where is my parcel?",
        "--body",
        "Ordered last week, nothing yet.",
    ]
    done = desk(tmp_path, "create", *args)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("T1042 created")  # after the 41 demo tickets
    ticket = read(tmp_path, "T1042")
    assert ticket.subject == "Where is my parcel?" and ticket.status == "open"
    assert [m.id for m in ticket.messages] == ["T1042-m1"]


def test_message_and_close_without_a_webhook(tmp_path: Path) -> None:
    done = desk(tmp_path, "message", "--ticket", "T1012", "--body", "Any news?", "--no-webhook")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "T1012-m2 added to T1012 by customer 'Daniel Murphy'; the ticket is open (no webhook sent)"
    ]
    reply = ["--ticket", "T1012", "--body", "Refunded.", "--author", "agent", "--name", "Maya"]
    done = desk(tmp_path, "message", *reply, "--no-webhook")
    assert done.returncode == 0, done.stderr
    assert "T1012-m3 added to T1012 by agent 'Maya'; the ticket is pending" in done.stdout
    ticket = read(tmp_path, "T1012")
    assert [(m.author, m.author_name, m.body) for m in ticket.messages[1:]] == [
        ("customer", "Daniel Murphy", "Any news?"),
        ("agent", "Maya", "Refunded."),
    ]
    assert ticket.status == "pending" and ticket.updated_at == ticket.messages[-1].created_at

    done = desk(tmp_path, "close", "--ticket", "T1012", "--no-webhook")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "T1012 closed (no webhook sent)"
    closed = read(tmp_path, "T1012")
    assert closed.status == "closed" and closed.updated_at > ticket.updated_at


def test_mistakes_are_one_line_on_stderr_and_change_nothing(tmp_path: Path) -> None:
    cases: list[tuple[list[str], dict[str, str], str]] = [
        (["message", "--ticket", "T1012", "--body", "hi"], {}, "no running stack found"),
        (["close", "--ticket", "T1012"], {}, "no running stack found"),
        (["message", "--ticket", "T9999", "--body", "hi", "--no-webhook"], {}, "T9999 does not"),
        (["close", "--ticket", "T9999", "--no-webhook"], {}, "T9999 does not exist"),
        (["message", "--ticket", "T1012", "--body", " ", "--no-webhook"], {}, "body is empty"),
        (
            ["message", "--ticket", "T1012", "--body", "hi", "--no-webhook"],
            {"DESK_HELPDESK_KIND": "http", "DESK_HELPDESK_URL": "http://127.0.0.1:9"},
            "only the demo (sql) helpdesk",
        ),
    ]
    for args, env, said in cases:
        done = desk(tmp_path, *args, **env)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert said in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1 and done.stdout == ""
    ticket = read(tmp_path, "T1012")
    assert len(ticket.messages) == 1 and ticket.status == "open"


def test_a_stack_that_is_gone_is_said_after_the_change(tmp_path: Path) -> None:
    fake_stack(tmp_path, f"http://127.0.0.1:{free_port()}")  # nobody listens there
    done = desk(tmp_path, "message", "--ticket", "T1041", "--body", "Hello?")
    assert done.returncode == 1
    assert done.stdout.startswith("T1041-m2 added to T1041")
    assert "the webhook was not sent: cannot reach ingress" in done.stderr
    assert "Traceback" not in done.stderr
    assert len(read(tmp_path, "T1041").messages) == 2


def stored_events(nats_url: str) -> list[tuple[str, dict[str, Any], dict[str, str]]]:
    async def go() -> list[tuple[str, dict[str, Any], dict[str, str]]]:
        bus = await Bus.connect(nats_url, service="test")
        try:
            found = await messages(bus.js, subjects.EVENTS)
        finally:
            await bus.close()
        return [(m.subject, json.loads(m.data), dict(m.headers or {})) for m in found]

    return asyncio.run(go())


def test_messages_and_closing_reach_a_real_ingress_signed(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    sources = {"helpdesk": {"scheme": "standard", "secrets": [SECRET]}}
    env = {"DESK_NATS_URL": nats_server.url, "DESK_SOURCES": json.dumps(sources)}
    ingress = ServiceProcess(["ingress"], env, tmp_path / "ingress.log").start()
    try:
        var = tmp_path / "var"
        fake_stack(var, ingress.url)
        said = desk(var, "message", "--ticket", "T1012", "--body", "Still charged twice!")
        assert said.returncode == 0, said.stderr
        added, answered = said.stdout.splitlines()
        assert added == "T1012-m2 added to T1012 by customer 'Daniel Murphy'; the ticket is open"
        assert answered.startswith("ticket.message.created webhook evt_")
        assert f"to {ingress.url}: 202 " in answered and '"duplicate":false' in answered
        after_message = read(var, "T1012")

        replied = desk(var, "message", "--ticket", "T1012", "--body", "Done.", "--author", "agent")
        assert replied.returncode == 0, replied.stderr
        closed = desk(var, "close", "--ticket", "T1012")
        assert closed.returncode == 0, closed.stderr
        assert closed.stdout.splitlines()[0] == "T1012 closed"
        assert closed.stdout.splitlines()[1].startswith("ticket.closed webhook evt_")
        final = read(var, "T1012")

        fake_stack(var, ingress.url, secret="whsec_" + base64.b64encode(b"x" * 32).decode())
        refused = desk(var, "message", "--ticket", "T1041", "--body", "Hello?")
        assert refused.returncode == 1
        assert "ingress refused the webhook" in refused.stderr and ": 401 " in refused.stderr
    finally:
        ingress.stop()

    events = stored_events(nats_server.url)
    assert [subject for subject, _, _ in events] == [
        "events.helpdesk.ticket.message.created",
        "events.helpdesk.ticket.message.created",
        "events.helpdesk.ticket.closed",
    ]
    (_, first, headers), (_, second, _), (_, last, _) = events
    assert headers["webhook-id"] == first["id"] and first["id"].startswith("evt_")
    assert headers["Nats-Msg-Id"] == f"helpdesk:{first['id']}"
    message = after_message.messages[-1]
    assert first["type"] == "ticket.message.created"
    assert dt.datetime.fromisoformat(first["created_at"]).tzinfo is not None
    assert first["data"] == {
        "ticket_id": "T1012",
        "updated_at": after_message.updated_at.isoformat(),
        "priority": "high",
        "status": "open",
        "message": {
            "id": "T1012-m2",
            "author": "customer",
            "author_name": "Daniel Murphy",
            "created_at": message.created_at.isoformat(),
        },
    }
    assert second["data"]["message"]["author"] == "agent"
    assert second["data"]["status"] == "pending"
    assert last["type"] == "ticket.closed"
    assert last["data"] == {
        "ticket_id": "T1012",
        "updated_at": final.updated_at.isoformat(),
        "status": "closed",
    }
    assert len({e["id"] for _, e, _ in events}) == 3
