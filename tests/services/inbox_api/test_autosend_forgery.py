"""Auto-send against the drafter's own credentials: with auto-send on for every category, an
`inbox.item` published with the drafter's NATS user is sent only when the router's work message
it names is about its ticket and gave it its category, and its round is a customer message the
ticket is waiting on. Real router, inbox_api and sender processes, each with its own NATS user
on a nats-server carrying the product's authorization, and the demo helpdesk the sender
re-reads and records replies in."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nats.js.api import RawStreamMsg
from sqlmodel import Session

from desk.helpdesk import ensure_demo
from desk.natsserver import NatsServer
from services.inbox_api import provenance, store
from services.inbox_api.store.tables import AutoSendRow, now
from services.sender import store as sender_store
from shared import conversation, ids, subjects
from shared import headers as h
from shared.bus import Bus
from shared.db import database_url, make_engine
from shared.envelope import Envelope
from shared.helpdesk.base import Ticket
from shared.helpdesk.events import ticket_event
from shared.helpdesk.sql import SqlSource
from shared.inbox import CATEGORIES, Trigger
from tests.helpers import eventually, messages, settled
from tests.inbox_items import draft_item, publish_item
from tests.postgres import fresh_schema, url_in
from tests.services_running import ServiceProcess
from tests.shared.test_permissions import PASSWORDS, admin, connect, secured

from .conftest import write_credentials

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)

__all__ = ["admin", "secured"]

# Tickets from the helpdesk's invoice form are invoices; the rest get no category.
RULES = """
[[rules]]
types = ["ticket.*"]
targets = ["drafter"]

[[rules]]
types = ["ticket.*"]
when = [{ path = "data.form", equals = "invoice" }]
targets = ["drafter"]
category = "invoice"
"""
REPLY = "Hi,\n\nA copy of the invoice is in your account.\n\nBest regards,\nThe Support Team"
PHISHING = "Hi,\n\nPlease confirm your payment details to keep your account.\n\nThe Support Team"


class Desk:
    """The router, inbox_api and sender as their own NATS users; the demo helpdesk."""

    def __init__(self, server: NatsServer, root: Path) -> None:
        self.root = root
        self.var = root / "var"
        write_credentials(self.var)
        self.helpdesk_url = f"sqlite:///{root / 'helpdesk.sqlite'}"
        ensure_demo(self.helpdesk_url)
        self.helpdesk = SqlSource(self.helpdesk_url)
        self.inbox = make_engine(database_url(None, self.var, "inbox"))
        self.sender = make_engine(database_url(None, self.var, "sender"))
        (root / "rules.toml").write_text(RULES)
        self.server = server
        self.processes: list[ServiceProcess] = []

    def start(self) -> None:
        for service in ("router", "inbox_api", "sender"):
            env = {
                "DESK_NATS_URL": self.server.url,
                "DESK_NATS_USER": service,
                "DESK_NATS_PASSWORD": PASSWORDS[service],
                "DESK_PROVISION": "false",
                "DESK_VAR_DIR": str(self.var),
                "DESK_HELPDESK_URL": self.helpdesk_url,
                "DESK_RULES_FILE": str(self.root / "rules.toml"),
                "DESK_RETRY_INITIAL": "0.2",
                "DESK_RELAY_INTERVAL": "0.2",
            }
            log = self.root / f"{service}.log"
            self.processes.append(ServiceProcess([service], env, log).start())

    def stop(self) -> None:
        for process in self.processes:
            process.stop()
        self.helpdesk.engine.dispose()
        self.inbox.dispose()
        self.sender.dispose()


@pytest.fixture
def desk(secured: NatsServer, tmp_path: Path) -> Iterator[Desk]:
    running = Desk(secured, tmp_path)
    try:
        yield running
    finally:
        running.stop()


def auto_send_on_for_every_category(engine: Any) -> None:
    store.create_tables(engine)
    with Session(engine) as session:
        for category in CATEGORIES:
            session.add(AutoSendRow(category=category, action="enabled", at=now(), by="admin"))
        session.commit()


async def routed(ingress: Bus, admin: Bus, ticket: Ticket, event_id: str, **data: Any) -> int:
    """A helpdesk event about `ticket`, as ingress stores it; the WORK sequence of the router's
    work item for the drafter about it."""
    body = ticket_event("ticket.created", ticket.id, event_id=event_id, **data)
    await ingress.publish(
        subjects.event("helpdesk", "ticket.created"),
        json.dumps(body).encode(),
        msg_id=f"helpdesk:{event_id}",
    )

    async def stored() -> int | None:
        for m in await messages(admin.js, subjects.WORK):
            if Envelope.model_validate_json(m.data or b"{}").id == f"helpdesk:{event_id}":
                return m.seq
        return None

    async def routed_now() -> bool:
        return await stored() is not None

    await eventually(routed_now, timeout=20, message=f"the work item about {ticket.id}")
    seq = await stored()
    assert seq is not None
    return seq


def item_for(
    ticket: Ticket,
    event_id: str | None,
    work_seq: int | None,
    *,
    category: str = "invoice",
    round_id: str | None = None,
    reply: str = REPLY,
) -> Any:
    """An item for `ticket` as the drafter writes one: its round the ticket's open round,
    unless `round_id` says otherwise; its trigger the event `event_id` at `work_seq`."""
    waiting = conversation.open_round(ticket)
    assert waiting is not None
    newest = waiting.messages[-1]
    item = draft_item(
        ticket.id,
        reply=reply,
        category=category,
        round_id=round_id or waiting.id,
        seen_through=newest.id,
        conversation=list(ticket.messages),
    )
    return item.model_copy(
        update={
            "round_messages": [round_id] if round_id else [newest.id],
            "trigger": Trigger(
                source="helpdesk",
                type="ticket.created",
                event_id=f"helpdesk:{event_id or 'evt_none'}",
                work_seq=work_seq,
            ),
        }
    )


async def test_items_forged_with_the_drafters_credentials_are_never_sent(
    admin: Bus, desk: Desk
) -> None:
    auto_send_on_for_every_category(desk.inbox)
    desk.start()
    ingress = await connect(desk.server, "ingress")
    drafter = await connect(desk.server, "drafter")
    try:
        make = desk.helpdesk.create_ticket
        genuine = make("C004", "Invoice copy", "Could you send me a copy of my last invoice?")
        never_routed = make("C005", "Hello", "Is anyone there?")
        elsewhere = make("C009", "Hi", "Can you call me back?")
        wrong_round = make("C006", "Invoice address", "Please change my invoice address.")
        not_the_rules = make("C007", "Refund", "I want my money back. CATEGORY=invoice")
        uncategorised = make("C008", "Question", "Where do I find my invoices?")
        phished = make("C010", "Invoice", "My invoice shows the wrong amount.")

        seq = await routed(ingress, admin, genuine, "evt_g", form="invoice")
        forged = [
            # (a) no work message at all, and one naming the genuine ticket's work message
            item_for(never_routed, None, None),
            item_for(elsewhere, "evt_g", seq),
            # (b) a real work message, a round that is no message of the ticket
            item_for(
                wrong_round,
                "evt_b",
                await routed(ingress, admin, wrong_round, "evt_b", form="invoice"),
                round_id="r-forged",
            ),
            # (c) a category the rules did not give: another one, and none at all
            item_for(
                not_the_rules,
                "evt_c",
                await routed(ingress, admin, not_the_rules, "evt_c", form="invoice"),
                category="refund",
            ),
            item_for(
                uncategorised,
                "evt_d",
                await routed(ingress, admin, uncategorised, "evt_d"),
            ),
            # (d) all of it genuine but the text, which the checks catch
            item_for(
                phished,
                "evt_e",
                await routed(ingress, admin, phished, "evt_e", form="invoice"),
                reply=PHISHING,
            ),
        ]
        for item in forged:
            await publish_item(drafter, item)
        real = item_for(genuine, "evt_g", seq)
        await publish_item(drafter, real)

        async def sent() -> list[Envelope]:
            found = [
                Envelope.model_validate_json(m.data or b"{}")
                for m in await messages(admin.js, subjects.RESULTS)
            ]
            return [e for e in found if e.type == "reply.sent"]

        async def any_sent() -> bool:
            return bool(await sent())

        await eventually(any_sent, timeout=30, message="the genuine item auto-sent")

        async def all_handled() -> bool:
            return (
                await settled(admin.js, subjects.INBOX, "inbox_api", delivered=True)
                and await settled(admin.js, subjects.INBOX, "sender", delivered=True)
                and not sender_store.pending_results(desk.sender)
                # the results the sender published, projected: a refused item shows failed
                and await settled(admin.js, subjects.RESULTS, "inbox_api-results", delivered=True)
            )

        await eventually(all_handled, timeout=30, message="every item and decision handled")
        [reply] = await sent()
        assert reply.data["ticket_id"] == genuine.id and reply.data["auto"] is True  # type: ignore[index]
        for ticket in (never_routed, elsewhere, wrong_round, not_the_rules, uncategorised, phished):
            shown = await desk.helpdesk.get_ticket(ticket.id)  # nothing was delivered to it
            assert [m.author for m in shown.messages] == ["customer"], ticket.id
        answered = await desk.helpdesk.get_ticket(genuine.id)
        assert [m.author for m in answered.messages] == ["customer", "agent"]
        held = {item.id: store.get_item(desk.inbox, item.id) or {} for item in forged}
        why = {k: " ".join(v.get("warnings") or []) for k, v in held.items()}
        assert held[forged[0].id]["status"] == "waiting"
        assert "names no work message" in why[forged[0].id]
        assert "about another ticket" in why[forged[1].id]
        assert held[forged[2].id]["status"] == "failed"  # the sender refused it
        assert "r-forged is no customer message" in str(held[forged[2].id]["result"])
        assert "gave this ticket 'invoice', not 'refund'" in why[forged[3].id]
        assert "gave this ticket no category" in why[forged[4].id]
        assert 'asks the customer to "verify"' in why[forged[5].id]
        for n in (0, 1, 3, 4, 5):  # each waits for a person, who sees why
            assert held[forged[n].id]["status"] == "waiting", forged[n].id
    finally:
        await ingress.close()
        await drafter.close()


def stored_work(item: Any, *, category: str | None = "invoice", **headers: str) -> RawStreamMsg:
    """The router's work message about `item`'s event, as WORK holds it at its `work_seq`."""
    trigger = item.trigger
    given: dict[str, Any] = {"category": category} if category else {}
    work = Envelope(
        id=trigger.event_id,
        source=trigger.source,
        type=trigger.type,
        data=ticket_event(trigger.type, item.ticket_id, event_id="evt"),
        **given,
    )
    return RawStreamMsg(
        subject=subjects.work("drafter", trigger.type),
        seq=trigger.work_seq,
        data=work.to_bytes(),
        headers={h.MSG_ID: ids.router(trigger.event_id, "drafter"), **headers},
    )


def test_what_the_work_message_must_say_for_auto_send() -> None:
    """The reasons an item waits for a person, from the work message WORK holds for it."""
    item = draft_item("T1", category="invoice", round_id="T1-m1").model_copy(
        update={
            "round_messages": ["T1-m1"],
            "trigger": Trigger(
                source="helpdesk", type="ticket.created", event_id="helpdesk:e1", work_seq=7
            ),
        }
    )
    genuine = stored_work(item)
    assert provenance.doubts(item, genuine) == []
    replayed = stored_work(item, **{h.ORIGINAL_MSG_ID: genuine.headers[h.MSG_ID]})  # type: ignore[index]
    replayed.headers[h.MSG_ID] = "replay:dlq-5"  # type: ignore[index]
    assert provenance.doubts(item, replayed) == []  # `desk dlq replay` keeps the original's id

    def why(changed: Any, stored: RawStreamMsg | None = genuine) -> str:
        return " ".join(provenance.doubts(changed, stored))

    assert "no message 7" in why(item, None)
    assert "is no work for the drafter" in why(
        item, RawStreamMsg(subject="work.notify.ticket.created", seq=7, data=genuine.data)
    )
    other_event = Trigger(
        source="helpdesk", type="ticket.created", event_id="helpdesk:e2", work_seq=7
    )
    assert "about another event" in why(item.model_copy(update={"trigger": other_event}))
    assert "about another ticket" in why(
        item.model_copy(update={"ticket_id": "T2", "thread": "T2"})
    )
    assert "no category" in why(item, stored_work(item, category=None))
    assert "gave this ticket 'bug'" in why(item, stored_work(item, category="bug"))
    followup = item.model_copy(update={"round_kind": "followup", "round_messages": []})
    assert "a follow-up answers no customer message" in why(followup)
    assert "mail conversation" in why(item.model_copy(update={"in_helpdesk": False}))


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_a_ticket_gets_at_most_the_days_auto_sent_replies(tmp_path: Path, database: str) -> None:
    """`per_ticket_day` auto-sent replies to one ticket in 24 hours; the next draft waits for a
    person, who is told why. A doubt holds an item back the same way."""
    if database == "postgresql":
        with fresh_schema() as schema:
            _at_most_per_day(make_engine(url_in(schema)))
    else:
        _at_most_per_day(make_engine(f"sqlite:///{tmp_path / 'inbox.sqlite'}"))


def _at_most_per_day(engine: Any) -> None:
    auto_send_on_for_every_category(engine)
    policy = store.autosend.Policy(per_ticket_day=2)

    def auto(version: int, doubts: tuple[str, ...] = ()) -> str:
        item = draft_item("T7", version, round_id=f"T7-m{version}", category="invoice")
        store.project(engine, item)
        reviewer = store.Reviewer("auto-send", "reviewer")
        try:
            store.decide(
                engine,
                item.id,
                "accept",
                None,
                version,
                reviewer,
                auto=store.autosend.applies(policy, doubts),
            )
        except store.autosend.Held as held:
            assert store.autosend.hold(engine, item.id, doubts or (str(held),))
            return str(held)
        return "sent"

    assert auto(1) == "sent" and auto(2) == "sent"
    assert "had 2 auto-sent replies in the last 24 hours (at most 2)" in auto(3)
    assert auto(4, ("auto-send: WORK holds no message 9",)) == "auto-send: WORK holds no message 9"
    shown = store.get_item(engine, "T7~v3") or {}
    assert "at most 2" in " ".join(shown["warnings"])  # what the reviewer of v3 was shown
    assert store.get_item(engine, "T7~v4")["warnings"] == ["auto-send: WORK holds no message 9"]  # type: ignore[index]
    engine.dispose()


def test_the_cap_is_checked_when_the_inbox_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    from shared.settings import InboxApiSettings

    monkeypatch.setenv("DESK_AUTOSEND_PER_TICKET_DAY", "0")
    with pytest.raises(ValueError, match="autosend_per_ticket_day"):
        InboxApiSettings()
