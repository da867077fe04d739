"""Attacks by a compromised service, each with that service's own NATS user on a real
nats-server carrying the product's authorization: what the catalog does not grant is refused,
and what a service may still write is not believed beyond what it is entitled to say."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
import time
from pathlib import Path

import nats
import pytest
from nats.aio.client import Client

from desk.dlq import render_letter, render_table
from desk.natsserver import NatsServer
from services.inbox_api import store
from services.inbox_api.handlers import ResultProjection
from services.ingress.imap import Mail, poll_once
from services.router.handlers import Router
from services.router.rules import Rules
from shared import catalog, deadletters, ids, subjects
from shared import headers as h
from shared.bus import Bus
from shared.consumer import Consumer, ConsumerRuntime
from shared.db import make_engine
from shared.envelope import Envelope
from shared.errors import PermanentError
from shared.history import stored_since
from shared.ledger import Ledger, ledger_key
from shared.results import REPLY_SENT, SOURCE_SENDER
from tests.helpers import eventually, messages
from tests.inbox_items import draft_item, publish_item
from tests.shared.test_permissions import PASSWORDS, admin, connect, secured

__all__ = ["admin", "secured"]  # the secured broker and its admin, shared with test_permissions


class Raw:
    """A plain connection as `user`, recording the permission violations the server reports."""

    def __init__(self, nc: Client, violations: list[str]) -> None:
        self.nc = nc
        self.violations = violations

    @classmethod
    async def connect(cls, server: NatsServer, user: str) -> Raw:
        violations: list[str] = []

        async def on_error(exc: Exception) -> None:
            violations.append(str(exc))

        nc = await nats.connect(
            server.url,
            user=user,
            password=PASSWORDS[user],
            inbox_prefix=f"_INBOX_{user}".encode(),
            error_cb=on_error,
            allow_reconnect=False,
        )
        return cls(nc, violations)

    async def refused(self, subject: str, payload: bytes = b"{}") -> bool:
        """Publish once: the server's violation comes before its answer to the flush, and
        nats-py hands it to `error_cb` in a task of its own, so give that task a moment."""
        before = len(self.violations)
        await self.nc.publish(subject, payload)
        await self.nc.flush()
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            if any(subject.lower() in v.lower() for v in self.violations[before:]):
                return True
            await asyncio.sleep(0.01)
        return False


async def test_a_forged_dead_letter_is_never_replayed(admin: Bus, secured: NatsServer) -> None:
    """As the drafter: forge a sender's dead letter holding a decision for a reviewer to
    replay. Replay goes by reference, so nothing reaches `inbox.decision`."""
    drafter = await connect(secured, "drafter")
    inbox_api = await connect(secured, "inbox_api")
    raw = await Raw.connect(secured, "drafter")
    try:
        item = draft_item("T900")
        await publish_item(drafter, item)  # INBOX seq 1: a genuine item
        forged = Envelope(
            id="decision:T900:r1:v1",
            source="/desk/inbox_api",
            type=subjects.INBOX_DECISION,
            time=dt.datetime.now(dt.UTC),
            data={"type": "edit", "args": {"reply": "Send me your password."}, "item_id": item.id},
        ).to_bytes()

        def letter(service: str, consumer: str) -> dict[str, str]:
            return {
                h.DLQ_SERVICE: service,
                h.DLQ_CONSUMER: consumer,
                h.DLQ_STREAM: subjects.INBOX,
                h.DLQ_STREAM_SEQ: "1",
                h.DLQ_SUBJECT: subjects.INBOX_DECISION,
                h.DLQ_REASON: "permanent",
            }

        # The sender's own dead-letter subject is not the drafter's to write.
        assert await raw.refused(subjects.dlq("sender"), forged)
        # Its own subject it may write, but a letter there naming the sender is refused...
        await drafter.publish(
            subjects.dlq("drafter"), forged, msg_id="f1", headers=letter("sender", "sender")
        )
        # ...and so is one naming its own consumer, when the stored original is not a decision.
        await drafter.publish(
            subjects.dlq("drafter"),
            forged,
            msg_id="f2",
            headers=letter("drafter", "drafter-decisions"),
        )
        first, second = await deadletters.list_dead_letters(inbox_api.js)
        with pytest.raises(deadletters.RefusedReplay, match=re.escape("sits on 'dlq.drafter'")):
            await deadletters.replay(inbox_api, first.id)
        with pytest.raises(deadletters.RefusedReplay, match="does not take"):
            await deadletters.replay(inbox_api, second.id)
        stored = [m.subject for m in await messages(admin.js, subjects.INBOX)]
        assert stored == [subjects.INBOX_ITEM]  # no decision was ever published
        assert await deadletters.count(admin.js) == 2  # refused letters stay to be looked at
    finally:
        await raw.nc.close()
        await drafter.close()
        await inbox_api.close()


async def test_a_dead_letter_is_listed_as_the_service_that_wrote_it(
    admin: Bus, secured: NatsServer
) -> None:
    """As the drafter: write a dead letter claiming to be the sender's, on the only dead-letter
    subject the drafter may write. Every listing names the drafter, and shows the claim."""
    drafter = await connect(secured, "drafter")
    inbox_api = await connect(secured, "inbox_api")
    try:
        claim = {
            h.DLQ_SERVICE: "sender",
            h.DLQ_CONSUMER: "sender",
            h.DLQ_STREAM: subjects.INBOX,
            h.DLQ_STREAM_SEQ: "1",
            h.DLQ_SUBJECT: subjects.INBOX_DECISION,
            h.DLQ_REASON: "permanent",
            h.DLQ_ERROR: "the sender could not deliver: call +1 415 555 0100",
        }
        await drafter.publish(subjects.dlq("drafter"), b"{}", msg_id="claim-1", headers=claim)
        [letter] = await deadletters.list_dead_letters(inbox_api.js)
        assert letter.service == "drafter"  # its subject's, not its own word
        assert letter.claimed_service == "sender"
        shown = await deadletters.get_dead_letter(inbox_api.js, letter.id)
        assert shown is not None and shown.service == "drafter"
        table = render_table([letter]).splitlines()[1]
        assert "drafter (claims sender!)" in table
        assert "drafter (claims sender!)" in render_letter(letter)
        with pytest.raises(deadletters.RefusedReplay, match="names service 'sender'"):
            await deadletters.replay(inbox_api, letter.id)
    finally:
        await drafter.close()
        await inbox_api.close()


async def test_a_replay_republishes_the_stored_original_not_the_letters_text(
    admin: Bus, secured: NatsServer
) -> None:
    """A letter naming a real decision, with the attacker's text as its payload: the reviewer's
    own decision goes out again, byte for byte; the attacker's text never does."""
    drafter = await connect(secured, "drafter")
    inbox_api = await connect(secured, "inbox_api")
    try:
        genuine = b'{"reviewer": "ann", "type": "accept"}'
        ack = await inbox_api.publish(subjects.INBOX_DECISION, genuine, msg_id="decision-1")
        await drafter.publish(
            subjects.dlq("drafter"),
            b'{"type": "edit", "args": {"reply": "attacker text"}}',
            msg_id="f3",
            headers={
                h.DLQ_SERVICE: "drafter",
                h.DLQ_CONSUMER: "drafter-decisions",
                h.DLQ_STREAM: subjects.INBOX,
                h.DLQ_STREAM_SEQ: str(ack.seq),
                h.DLQ_SUBJECT: subjects.INBOX_DECISION,
            },
        )
        [letter] = await deadletters.list_dead_letters(inbox_api.js)
        result = await deadletters.replay(inbox_api, letter.id)
        replayed = await admin.js.get_msg(subjects.INBOX, result.seq)
        assert (replayed.subject, replayed.data) == (subjects.INBOX_DECISION, genuine)
        assert (replayed.headers or {})[h.ORIGINAL_MSG_ID] == "decision-1"
    finally:
        await drafter.close()
        await inbox_api.close()


async def test_no_service_can_rewrite_or_delete_another_services_consumer(
    admin: Bus, secured: NatsServer
) -> None:
    """As the reconciler: narrowing the router's filter would make ingress answer 202 while
    events are skipped for good. The reconciler reads streams message by message instead."""
    declared = catalog.ROUTER.consumer("router")  # provisioned by the admin
    await admin.publish(subjects.event("helpdesk", "ticket.created"), b"{}", msg_id="e1")

    raw = await Raw.connect(secured, "reconciler")
    reconciler = await connect(secured, "reconciler")
    try:
        rewrite = json.dumps(
            {
                "stream_name": subjects.EVENTS,
                "config": {"durable_name": "router", "filter_subject": "events.nothing.>"},
            }
        ).encode()
        for subject in (
            f"$JS.API.CONSUMER.CREATE.{subjects.EVENTS}.router.events.nothing.>",
            f"$JS.API.CONSUMER.CREATE.{subjects.EVENTS}.router",
            f"$JS.API.CONSUMER.DELETE.{subjects.EVENTS}.router",
            f"$JS.API.CONSUMER.CREATE.{subjects.EVENTS}.snoop",  # a consumer of its own making
        ):
            assert await raw.refused(subject, rewrite), subject
        # Not even its own consumer: a create request could aim a push delivery anywhere.
        own = await Raw.connect(secured, "router")
        try:
            assert await own.refused(f"$JS.API.CONSUMER.CREATE.{subjects.EVENTS}.router", rewrite)
        finally:
            await own.nc.close()
        for subject in ():
            assert await raw.refused(subject, rewrite), subject
        info = await admin.js.consumer_info(subjects.EVENTS, "router")
        assert info.config.filter_subject == declared.subjects[0]
        # What it needs, it can do without any consumer: the daily report's counts.
        stored = await stored_since(
            reconciler, subjects.EVENTS, dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
        )
        assert [m.subject for m in stored] == ["events.helpdesk.ticket.created"]
    finally:
        await raw.nc.close()
        await reconciler.close()


async def test_each_ledger_is_written_by_its_service_alone(admin: Bus, secured: NatsServer) -> None:
    """A forged `seen:` key would make the reconciler skip a lost ticket; a forged lease would
    block the sender. Each service writes only its own bucket; the reconciler reads the
    router's."""
    seen_key = ledger_key(ids.seen("ticket.created", "T1"))
    lease_key = ledger_key("lease:outbox:T1/r1/send_reply")
    drafter = await Raw.connect(secured, "drafter")
    reconciler = await Raw.connect(secured, "reconciler")
    try:
        for raw in (drafter, reconciler):
            assert await raw.refused(f"$KV.{catalog.ledger_bucket('router')}.{seen_key}")
        assert await drafter.refused(f"$KV.{catalog.ledger_bucket('sender')}.{lease_key}")
        assert await drafter.refused(f"$KV.{catalog.STATE}.backfill_cursor")
        assert await drafter.refused(f"$JS.API.STREAM.MSG.GET.KV_{catalog.ledger_bucket('sender')}")
    finally:
        await drafter.nc.close()
        await reconciler.nc.close()

    router_bus = await connect(secured, "router")
    reconciler_bus = await connect(secured, "reconciler")
    try:
        assert await (await Ledger.open(router_bus.js, "router")).claim(ids.seen("x", "T2"))
        seen = await Ledger.reader(reconciler_bus.js, "reconciler", "router")
        assert await seen.seen(ids.seen("x", "T2"))  # it reads what the router has seen
        assert not await seen.seen(ids.seen("ticket.created", "T1"))  # nothing forged there
    finally:
        await router_bus.close()
        await reconciler_bus.close()


async def test_the_inbox_believes_the_subject_a_result_arrived_on(
    admin: Bus, secured: NatsServer, tmp_path: Path
) -> None:
    """As the reconciler: a `reply.sent` CloudEvent on its own `results.report.daily` subject
    once marked a waiting item sent. The inbox consumes only the sender's result subjects, and
    a body that disagrees with its subject is dead-lettered."""
    engine = make_engine(f"sqlite:///{tmp_path / 'inbox.sqlite'}")
    store.create_tables(engine)
    forged_item, control_item = draft_item("T901"), draft_item("T902")
    for item in (forged_item, control_item):
        store.project(engine, item)

    def result(item_id: str, kind: str = REPLY_SENT, source: str = SOURCE_SENDER) -> bytes:
        return Envelope(
            id=f"result-{item_id}-{kind}-{source}",
            source=source,
            type=kind,
            time=dt.datetime.now(dt.UTC),
            data={"item_id": item_id, "ticket_id": "T901"},
        ).to_bytes()

    reconciler = await connect(secured, "reconciler")
    sender = await connect(secured, "sender")
    inbox_api = await connect(secured, "inbox_api")
    runtime = ConsumerRuntime(
        inbox_api,
        "inbox_api",
        Consumer.of(
            catalog.INBOX_API.consumer("inbox_api-results"), ResultProjection(engine).on_result
        ),
        fetch_timeout=0.2,
        create=False,
    )
    await runtime.start()
    try:
        await reconciler.publish(
            subjects.result("report.daily"),
            result(forged_item.id, source="/desk/reconciler"),
            msg_id="r1",
        )
        # The sender's subject, a body claiming another kind: dead-lettered, not believed.
        await sender.publish(subjects.result("reply.failed"), result(forged_item.id), msg_id="r2")
        await sender.publish(subjects.result(REPLY_SENT), result(control_item.id), msg_id="r3")

        def status(item_id: str) -> str:
            row = store.get_item(engine, item_id)
            assert row is not None
            return str(row["status"])

        await eventually(lambda: status(control_item.id) == "sent", message="the genuine result")
        await eventually(
            lambda: deadletters.count(admin.js), message="the mismatched result dead-lettered"
        )
        assert status(forged_item.id) == "waiting"
        [letter] = await deadletters.list_dead_letters(admin.js)
        assert "says it is 'reply.sent'" in letter.error
    finally:
        await runtime.stop(timeout=5)
        for bus in (reconciler, sender, inbox_api):
            await bus.close()
        engine.dispose()


async def test_the_router_believes_the_subject_not_the_headers(admin: Bus) -> None:
    """As the reconciler (it may publish `events.reconciler.>`): headers claiming a helpdesk
    event of another type do not make it one."""
    from shared.consumer import Delivery

    router = Router(admin, Rules.load(None), await Ledger.open(admin.js, "router"))
    delivery = Delivery(
        subject="events.reconciler.ticket.stale",
        body={"ticket_id": "T1"},
        headers={h.SOURCE: "helpdesk", h.EVENT_TYPE: "ticket.created"},
        msg_id="forged-1",
        attempt=1,
        stream_seq=1,
        data=b"{}",
        stored_at=dt.datetime.now(dt.UTC),
        payload=None,
    )
    forged = re.escape("disagrees with events.reconciler.ticket.stale")
    with pytest.raises(PermanentError, match=forged):
        await router.handle(delivery)
    assert await messages(admin.js, subjects.WORK) == []


class OneMail:
    """The mailbox side of the poller (the IMAP server itself is tested with dovecot)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def unseen(self) -> list[Mail]:
        raw = b"Message-ID: <m1@example.com>\r\nFrom: a@example.com\r\nSubject: hi\r\n\r\nHello\r\n"
        return [] if self.seen else [Mail("1", raw)]

    def mark_seen(self, uids: list[str]) -> None:
        self.seen += uids


async def test_the_mail_poller_works_as_its_own_user_and_only_stores_mail(
    admin: Bus, secured: NatsServer
) -> None:
    poller = await connect(secured, "ingress_imap")
    raw = await Raw.connect(secured, "ingress_imap")
    try:
        mailbox = OneMail()
        assert (await poll_once(mailbox, poller, "email")).stored == 1  # type: ignore[arg-type]
        assert mailbox.seen == ["1"]
        [stored] = await messages(admin.js, subjects.EVENTS)
        assert stored.subject == subjects.event("email", "email.received")
        assert await raw.refused(subjects.event("helpdesk", "ticket.created"))
        assert await raw.refused(subjects.INBOX_DECISION)
    finally:
        await raw.nc.close()
        await poller.close()


async def test_an_outside_subscriber_reads_results_through_its_own_consumer_only(
    admin: Bus, secured: NatsServer
) -> None:
    sender = await connect(secured, "sender")
    subscriber = await connect(secured, "subscriber")
    raw = await Raw.connect(secured, "subscriber")
    try:
        await sender.publish(
            subjects.result(REPLY_SENT),
            b"{}",
            msg_id="res-1",
            headers={h.CONTENT_TYPE: h.CLOUDEVENTS_JSON},
        )
        sub = await subscriber.js.pull_subscribe_bind("subscriber", stream=subjects.RESULTS)
        [msg] = await sub.fetch(1, timeout=5)
        assert (msg.headers or {})[h.CONTENT_TYPE] == h.CLOUDEVENTS_JSON
        await msg.ack()
        for subject in (
            f"$JS.API.CONSUMER.MSG.NEXT.{subjects.RESULTS}.inbox_api-results",
            f"$JS.API.CONSUMER.CREATE.{subjects.RESULTS}.inbox_api-results",
            f"$JS.API.CONSUMER.CREATE.{subjects.RESULTS}",  # an unnamed one
            f"$JS.API.CONSUMER.CREATE.{subjects.RESULTS}.subscriber",  # push it elsewhere
            f"$JS.API.STREAM.MSG.GET.{subjects.EVENTS}",
            subjects.result(REPLY_SENT),
        ):
            assert await raw.refused(subject), subject
    finally:
        await raw.nc.close()
        await subscriber.close()
        await sender.close()


async def test_only_the_inbox_tells_the_drafter_an_audit(admin: Bus, secured: NatsServer) -> None:
    """As the drafter (whose drafts a `fine` audit would make examples for every later draft)
    and as every other service or role: an audit notice is refused by the broker. The inbox,
    where people audit, is the one that may publish it."""
    item = draft_item("T901")
    notice = Envelope(
        id=ids.audited(item.thread, item.round, item.version),
        source="/desk/inbox_api",
        type=subjects.INBOX_AUDITED,
        data={
            "item_id": item.id,
            "thread": item.thread,
            "round": item.round,
            "version": item.version,
            "verdict": "fine",
            "at": dt.datetime.now(dt.UTC).isoformat(),
        },
    ).to_bytes()
    for role in catalog.ROLES:
        if role.name == "inbox_api":
            continue
        raw = await Raw.connect(secured, role.name)
        try:
            assert await raw.refused(subjects.INBOX_AUDITED, notice), role.name
        finally:
            await raw.nc.close()
    assert await messages(admin.js, subjects.INBOX) == []
    inbox_api = await connect(secured, "inbox_api")
    try:
        await inbox_api.publish(subjects.INBOX_AUDITED, notice, msg_id="audited")
    finally:
        await inbox_api.close()
    assert [m.subject for m in await messages(admin.js, subjects.INBOX)] == [subjects.INBOX_AUDITED]
