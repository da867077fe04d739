"""The claims group: messages and requests that claim to be someone they are not, each sent with
credentials the stack really gives out, while auto-send is on for every category.

- **Items, as the drafter's NATS user** (a leaked drafter password): `inbox.item`s for open demo
  tickets the campaign does not otherwise touch, with no warning, a category of their own and a
  reply that reads well, each claiming something untrue: a work message that does not exist,
  the router's work message about another ticket, a round the ticket does not have, another
  ticket's thread. None may be sent: no decision on it, no `reply.sent`.
- **A dead letter, as the drafter**: on `dlq.drafter` (all the drafter may write), claiming in
  its headers to be the sender's, about a real decision. The inbox lists it as the drafter's,
  and replaying it is refused.
- **A decision that names another reviewer**: the inbox API's decision with `reviewer` and
  `auto` fields claiming auto-send; the decision recorded is the token's reviewer's, by a person.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from shared import headers as h
from shared import ids, subjects
from shared.bus import Bus, NatsAuth
from shared.envelope import Envelope
from shared.inbox import (
    CATEGORIES,
    DRAFT_CONFIG,
    SEND_REPLY,
    ActionRequest,
    InboxItem,
    Trigger,
    item_id,
)

from ..facts import log
from .campaign import Campaign

REPLY = (
    "Hello,\n\nYour refund was approved in full and is on its way.\n\n"
    "Kind regards,\nThe Support Team"
)
VERSION = 90  # far above any version the drafter gives these tickets
MARKER = "badinput-claimed-dead-letter"


@dataclass
class Claims:
    items: dict[str, str] = field(default_factory=dict)  # forged item id -> what it claimed
    believed: list[str] = field(default_factory=list)  # forged items decided or sent
    letters: list[str] = field(default_factory=list)  # dead letters shown as their claim
    decisions: list[str] = field(default_factory=list)  # decisions recorded as their claim
    tried: int = 0
    error: str = ""


def _auto_send_on(inbox: httpx.Client, report: Any) -> list[str]:
    """Auto-send on again for every category it can be (the API fuzz may have turned some
    off, or reviewers' edits taken their evidence); the categories it is on for."""
    for category in CATEGORIES:
        inbox.post(f"/api/autosend/{category}", json={"enabled": True, "eval": report})
    shown = inbox.get("/api/autosend")
    if shown.status_code != 200:
        return []
    return [c for c, v in shown.json()["categories"].items() if v.get("enabled")]


def forged(
    category: str,
    ticket: str,
    round_: str,
    claim: str,
    *,
    thread: str | None = None,
    work_seq: int | None = None,
) -> InboxItem:
    thread = thread or ticket
    return InboxItem(
        action_request=ActionRequest(
            action=SEND_REPLY,
            args={"ticket_id": ticket, "subject": "Re: your refund", "reply": REPLY},
        ),
        config=DRAFT_CONFIG,
        description=f"Ticket {ticket}: a reply ({claim})",
        id=item_id(thread, VERSION),
        thread=thread,
        version=VERSION,
        ticket_id=ticket,
        category=category,
        summary="Customer asks about a refund",
        trigger=Trigger(
            source="helpdesk",
            type="ticket.message.created",
            event_id=f"helpdesk:claimed-{ticket}",
            work_seq=work_seq,
        ),
        created_at=dt.datetime.now(dt.UTC),
        round=round_,
        round_messages=[round_],
        ticket_status="open",
    )


async def _work_seq(admin: Bus, ticket: str) -> int | None:
    """The WORK stream sequence of the router's first message about `ticket`, if any."""
    info = await admin.js.stream_info(subjects.WORK)
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        try:
            msg = await admin.js.get_msg(subjects.WORK, seq)
        except Exception:
            continue
        if not msg.data:
            continue
        event = Envelope.model_validate_json(msg.data).data
        body = event.get("data") if isinstance(event, dict) else None
        if isinstance(body, dict) and body.get("ticket_id") == ticket:
            return seq
    return None


async def _decisions_on(admin: Bus, ids_: set[str]) -> list[str]:
    info = await admin.js.stream_info(subjects.INBOX, subjects_filter=subjects.INBOX_DECISION)
    found = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        try:
            msg = await admin.js.get_msg(subjects.INBOX, seq)
        except Exception:
            continue
        if msg.subject != subjects.INBOX_DECISION or not msg.data:
            continue
        data = Envelope.model_validate_json(msg.data).data
        if isinstance(data, dict) and data.get("item_id") in ids_:
            found.append(
                f"{data.get('item_id')} decided {data.get('type')} by {data.get('reviewer')}"
            )
    return found


async def _sent_for(admin: Bus, ids_: set[str]) -> list[str]:
    info = await admin.js.stream_info(subjects.RESULTS)
    found = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        try:
            msg = await admin.js.get_msg(subjects.RESULTS, seq)
        except Exception:
            continue
        if not msg.data or not (msg.subject or "").endswith("reply.sent"):
            continue
        data = Envelope.model_validate_json(msg.data).data
        if isinstance(data, dict) and data.get("item_id") in ids_:
            found.append(f"{data.get('item_id')} sent to {data.get('ticket_id')}")
    return found


async def _settled(admin: Bus) -> bool:
    for durable in ("inbox_api", "sender"):
        info = await admin.js.consumer_info(subjects.INBOX, durable)
        if info.num_pending or info.num_ack_pending:
            return False
    return True


async def _forge(
    c: Campaign, state: dict[str, Any], creds: dict[str, Any], category: str, claims: Claims
) -> None:
    admin = await Bus.connect(state["nats_admin_url"], service="badinput", reconnect=False)
    drafter = await Bus.connect(
        state["nats_url"],
        service="drafter",
        auth=NatsAuth(user="drafter", password=creds["nats_passwords"]["drafter"]),
        reconnect=False,
    )
    try:
        other = await _work_seq(admin, "T1012")
        items = [
            forged(category, "T1009", "T1009-m2", "no work message"),
            forged(category, "T1020", "T1020-m99", "a round the ticket does not have"),
            forged(category, "T1023", "T1023-m2", "another ticket's work message", work_seq=other),
            forged(category, "T1031", "T1031-m2", "another ticket's thread", thread="T1035"),
        ]
        for item in items:
            msg_id = ids.inbox_item(item.thread, item.round, item.version)
            envelope = Envelope(
                id=msg_id,
                source="/desk/drafter",
                type=subjects.INBOX_ITEM,
                subject=item.thread,
                time=item.created_at,
                data=item.model_dump(mode="json"),
            )
            await drafter.publish(subjects.INBOX_ITEM, envelope.to_bytes(), msg_id=msg_id)
            claims.items[item.id] = item.description or ""
        claims.tried += len(items)

        # a dead letter on the drafter's own subject, claiming to be the sender's
        decision_seq = None
        info = await admin.js.stream_info(subjects.INBOX, subjects_filter=subjects.INBOX_DECISION)
        if info.state.messages:
            decision_seq = info.state.last_seq
        await drafter.publish(
            subjects.dlq("drafter"),
            f'{{"{MARKER}": true}}'.encode(),
            msg_id=f"badinput-claim-{c.seed}",
            headers={
                h.DLQ_SERVICE: "sender",
                h.DLQ_CONSUMER: "sender",
                h.DLQ_STREAM: subjects.INBOX,
                h.DLQ_STREAM_SEQ: str(decision_seq or 1),
                h.DLQ_SUBJECT: subjects.INBOX_DECISION,
                h.DLQ_ATTEMPTS: "1",
                h.DLQ_REASON: "permanent",
                h.DLQ_ERROR: "claimed by the drafter",
                h.DLQ_TIME: dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            },
        )
        claims.tried += 1

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the inbox and the sender have handled them
            if await _settled(admin):
                break
            await asyncio.sleep(0.5)
        forged_ids = set(claims.items)
        claims.believed += await _decisions_on(admin, forged_ids)
        claims.believed += await _sent_for(admin, forged_ids)
    finally:
        await drafter.close()
        await admin.close()


def _dead_letter(c: Campaign, inbox: httpx.Client, claims: Claims) -> None:
    listed = inbox.get("/api/deadletters")
    if listed.status_code != 200:
        claims.letters.append(f"the dead letters could not be listed: {listed.status_code}")
        return
    letters = listed.json()["dead_letters"]
    mine = [d for d in letters if MARKER in str(d.get("payload", ""))]
    if not mine:
        claims.letters.append("the drafter's dead letter is not listed")
        return
    for letter in mine:
        if letter.get("service") != "drafter":
            claims.letters.append(
                f"dead letter {letter.get('id')} listed as {letter.get('service')!r}"
            )
        replay = inbox.post(f"/api/deadletters/{letter.get('id')}/replay")
        c.tally.answered("claims/replay", replay.status_code)
        if replay.status_code < 300:
            claims.letters.append(f"dead letter {letter.get('id')} replayed: {replay.status_code}")


def _decision(c: Campaign, inbox: httpx.Client, items: list[str], claims: Claims) -> None:
    for item in items[:2]:
        shown = inbox.get(f"/api/items/{item}")
        if shown.status_code != 200 or shown.json().get("status") != "waiting":
            continue
        body = {
            "type": "ignore",
            "version": shown.json()["version"],
            "reviewer": "auto-send",
            "auto": True,
            "decided_by": "admin",
        }
        answer = inbox.post(f"/api/items/{item}/decision", json=body)
        c.tally.answered("claims/decision", answer.status_code)
        claims.tried += 1
        if answer.status_code >= 500:
            c.tally.server_errors.append(f"claims decision -> {answer.status_code}")
        if answer.status_code != 202:
            continue
        c.tally.decided.add(item)
        recorded = (inbox.get(f"/api/items/{item}").json().get("decisions") or [{}])[-1]
        if recorded.get("reviewer") != "reviewer" or recorded.get("auto"):
            claims.decisions.append(f"{item}: recorded as {recorded!r:.120}")


def claims_campaign(
    c: Campaign, state: dict[str, Any], creds: dict[str, Any], report: Any
) -> Claims:
    """Forge, then judge; `report` is the eval evidence auto-send is turned on with."""
    claims = Claims()
    started = time.monotonic()
    auth = {"Authorization": f"Bearer {c.reviewer}"}
    try:
        with httpx.Client(base_url=c.inbox, timeout=15, headers=auth) as inbox:
            on = _auto_send_on(inbox, report)
            if not on:
                raise RuntimeError("auto-send is on for no category: a forgery would prove nothing")
            category = "invoice" if "invoice" in on else on[0]
            asyncio.run(_forge(c, state, creds, category, claims))
            _dead_letter(c, inbox, claims)
            waiting = inbox.get("/api/items", params={"status": "waiting", "limit": "10"})
            items = [i["id"] for i in waiting.json()["items"]] if waiting.status_code == 200 else []
            _decision(c, inbox, items, claims)
    except Exception as exc:  # the group could not run: its verdict says so
        claims.error = f"{exc.__class__.__name__}: {str(exc)[:200]}"
    log(f"claims: {claims.tried} claims in {time.monotonic() - started:.1f}s")
    return claims
