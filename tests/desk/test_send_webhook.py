"""`desk send-webhook` against a real ingress set up as `desk up` sets it up (its dev sources,
the demo helpdesk): a ticket's event carries the ticket's own priority, so a high-priority
ticket waits in the urgent queue; `--source email` sends a mail the ingress stores and the
drafter reads as one."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from desk import cli
from desk.credentials import load_or_create
from desk.helpdesk import ensure_demo
from desk.natsserver import NatsServer
from services.drafter.threads import work_for
from services.router.rules import Rules
from shared import subjects
from shared.bus import Bus
from shared.envelope import Envelope
from shared.settings import HelpdeskSettings
from tests.helpers import messages
from tests.services_running import ServiceProcess

pytestmark = pytest.mark.usefixtures("no_desk_env")


def send_webhook(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """`desk send-webhook ARGS`, run as the console script runs it; what it printed."""
    assert cli.main(["send-webhook", *args]) == 0, capsys.readouterr().err
    return capsys.readouterr().out


async def stored(nats_url: str) -> dict[tuple[str, str], Any]:
    """Every event the ingress stored, by (source, type)."""
    bus = await Bus.connect(nats_url, service="test")
    try:
        found = await messages(bus.js, subjects.EVENTS)
    finally:
        await bus.close()
    return {subjects.parse_event(m.subject or ""): json.loads(m.data or b"") for m in found}


def test_a_ticket_s_own_priority_and_a_mail_reach_the_ingress(
    nats_server: NatsServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    var = tmp_path / "var"
    creds = load_or_create(var)  # the dev credentials `desk up` writes: its sources' secrets
    ensure_demo(HelpdeskSettings(var_dir=var).helpdesk_location())
    env = {"DESK_NATS_URL": nats_server.url, "DESK_VAR_DIR": str(var)}
    ingress = ServiceProcess(["ingress"], env, tmp_path / "ingress.log").start()
    state = {"credentials": str(creds), "services": {"ingress": {"url": ingress.url}}}
    (var / "stack.json").write_text(json.dumps(state))  # what `desk up` says of itself
    monkeypatch.setenv("DESK_VAR_DIR", str(var))

    assert send_webhook(capsys, "--ticket", "T1027").startswith("202 ")  # a high-priority one
    assert send_webhook(capsys, "--source", "email").startswith("202 ")

    events = asyncio.run(stored(nats_server.url))
    created = events[("helpdesk", "ticket.created")]
    assert created["data"]["priority"] == "high"
    assert Rules.load(None).queue("helpdesk", "ticket.created", created) == "urgent"

    received = events[("email", "email.received")]
    at = dt.datetime.now(dt.UTC)
    envelope = Envelope(id="e1", source="email", type="email.received", time=at, data=received)
    work = work_for(envelope)  # a ticket-shaped body: PermanentError, a dead letter
    assert work.kind == "mail"
    assert work.inline_ticket is not None
    assert work.inline_ticket["customer"]["email"] == "robin.sample@example.com"
