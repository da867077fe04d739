"""The sender's handlers: remember items; turn accept/edit decisions into one outbox row each.

Every decision handler opens with its guard: the outbox key's UNIQUE constraint, one key per
round of a conversation (`<ticket>/<round>/<action>`). A second decision, a redelivery or a
replay for the same round writes nothing and reports already_sent; the next round has its own.

Right before a reply leaves (each attempt whose request has not gone out yet), the ticket is
read again: closed, answered by a person in the helpdesk, or written to again by the customer
since the draft was made → nothing is sent, and `reply.withdrawn` says why. Every approved
round ends in exactly one of `reply.sent`, `reply.withdrawn`, `reply.failed`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from prometheus_client import Counter
from sqlalchemy.engine import Engine

from shared import clock, conversation, edits, ids, mail, screening
from shared.consumer import Delivery
from shared.envelope import Envelope
from shared.errors import BusinessReject, PermanentError, TransientError, Unavailable
from shared.helpdesk import SourceSystem
from shared.helpdesk.base import ReplyRecorder
from shared.inbox import ActionRequest, Decision, InboxItem, Withdrawal
from shared.ledger import Ledger
from shared.logging import redact
from shared.outbox import Relay
from shared.results import (
    ITEM_IGNORED,
    ITEM_WITHDRAWN,
    REPLY_FAILED,
    REPLY_SENT,
    REPLY_WITHDRAWN,
    event_id,
)
from shared.settings import SenderSettings

from . import store
from .channel import Attempt, WebhookChannel

log = logging.getLogger(__name__)

OUTCOMES = Counter(
    "desk_sender_outcomes_total",
    "Decisions handled by the sender, by outcome.",
    ["outcome"],
)
DELIVERIES = Counter(
    "desk_sender_deliveries_total",
    "Channel delivery attempts, by channel and outcome.",
    ["channel", "outcome"],
)
OUTCOME_NAMES = (
    "written",
    "already_sent",
    "sent",
    "failed",
    "withdrawn",
    "superseded",
    "ignored",
    "item_withdrawn",
)
DELIVERY_OUTCOMES = ("delivered", "failed", "retry", "unknown", "wait")
for _name in OUTCOME_NAMES:  # every series exists at 0 from the start (see shared.consumer)
    OUTCOMES.labels(_name)


def _result(kind: str, key: str, subject: str | None, data: dict[str, Any]) -> store.ResultRow:
    return store.ResultRow(
        id=event_id(kind, key), type=kind, subject=subject, data=data, created_at=store.now()
    )


def _reply_data(row: store.OutboxRow) -> dict[str, Any]:
    return {
        "outbox_key": row.key,
        "item_id": row.item_id,
        "thread": row.thread,
        "round": row.round,
        "version": row.version,
        "ticket_id": row.ticket_id,
        "action": row.action,
        "text": row.final_text,
        "model_draft": row.model_draft,
        "decision": row.decision_type,
        "reviewer": row.reviewer,
        "auto": bool(row.auto),  # sent by auto-send (the trail and the audits say more)
        "channel": row.channel,
        "delivery": row.delivery,
        "seen_through": row.seen_through,  # the newest message the reply answers
    }


class Sender:
    def __init__(
        self,
        engine: Engine,
        relay: Relay,
        channel: WebhookChannel | None,
        ledger: Ledger,
        source: SourceSystem | None,
        *,
        delivery_deadline: float = 4 * 3600,
        lease_ttl: float,
        lease_wait: float,
        record_replies: bool = True,
    ) -> None:
        self.engine = engine
        self.relay = relay
        self.channel = channel
        self.ledger = ledger
        self.source = source  # None: no fresh-state check (tests of the outbox alone)
        # the outbox is the send and the helpdesk is ours (the demo): the reply joins the ticket
        self.recorder = (
            source
            if record_replies and channel is None and isinstance(source, ReplyRecorder)
            else None
        )
        self.delivery_deadline = delivery_deadline  # seconds from approval to reply.failed
        for outcome in DELIVERY_OUTCOMES:
            DELIVERIES.labels(self.channel_name, outcome)
        self.lease_ttl = lease_ttl
        self.lease_wait = lease_wait

    @classmethod
    def configured(
        cls,
        settings: SenderSettings,
        engine: Engine,
        relay: Relay,
        channel: WebhookChannel | None,
        ledger: Ledger,
        source: SourceSystem,
    ) -> Sender:
        """As the settings say; `source` is read again right before each reply leaves."""
        log.info("delivering through %s", channel.url if channel else "the outbox only")
        return cls(
            engine,
            relay,
            channel,
            ledger,
            source,
            record_replies=settings.record_replies,
            delivery_deadline=settings.delivery_deadline,
            lease_ttl=max(5.0, settings.ack_wait),
            lease_wait=settings.channel_connect_timeout + settings.channel_read_timeout + 15,
        )

    @property
    def channel_name(self) -> str:
        return self.channel.name if self.channel else "outbox"

    async def on_item(self, delivery: Delivery[Envelope]) -> None:
        item: InboxItem = delivery.payload  # checked by the runtime (Consumer.payload)
        answering = next(
            (m for m in reversed(item.conversation) if m.id in set(item.round_messages)), None
        )
        row = store.ItemRow(
            item_id=item.id,
            thread=item.thread,
            version=item.version,
            ticket_id=item.ticket_id,
            action=item.action_request.action,
            args=item.action_request.args,
            round=item.round,
            seen_through=item.seen_through,
            in_helpdesk=item.in_helpdesk,
            recipient=(
                {"name": item.customer.name, "email": item.customer.email}
                if item.customer
                else None
            ),
            in_reply_to=(
                {"message_id": answering.id, "excerpt": _excerpt(answering.body)}
                if answering
                else None
            ),
            round_author=answering.author_email if answering else None,
            knowledge=[t for c in item.citations for t in (c.title, c.passage, c.url or "") if t],
        )
        await asyncio.to_thread(store.see_item, self.engine, row)

    async def on_withdrawn(self, delivery: Delivery[Envelope]) -> None:
        """The drafter took a waiting draft back: publish `item.withdrawn`, once."""
        notice: Withdrawal = delivery.payload
        result = _result(
            ITEM_WITHDRAWN,
            notice.item_id,
            notice.ticket_id or notice.thread,
            {
                "item_id": notice.item_id,
                "thread": notice.thread,
                "round": notice.round,
                "version": notice.version,
                "ticket_id": notice.ticket_id,
                "reason": notice.reason,
            },
        )
        await asyncio.to_thread(store.record, self.engine, None, result)
        OUTCOMES.labels("item_withdrawn").inc()
        self.relay.wake()

    async def on_decision(self, delivery: Delivery[Envelope]) -> None:
        decision: Decision = delivery.payload
        if decision.type == "response":
            return  # feedback goes back to the drafter; nothing leaves the building
        # a newer version of the same round (a redraft) replaces this one; a newer round is the
        # fresh-state check's to judge (the customer wrote again → withdrawn)
        current = await asyncio.to_thread(
            store.current_version, self.engine, decision.thread, decision.round
        )
        if current is not None and decision.version < current:
            OUTCOMES.labels("superseded").inc()
            raise BusinessReject(
                f"decision on v{decision.version}; the thread is at v{current}",
                outcome="superseded",
            )
        if decision.type == "ignore":
            result = _result(
                ITEM_IGNORED,
                decision.item_id,
                decision.thread,
                {
                    "item_id": decision.item_id,
                    "thread": decision.thread,
                    "version": decision.version,
                    "reviewer": decision.reviewer,
                },
            )
            await asyncio.to_thread(store.record, self.engine, None, result)
            OUTCOMES.labels("ignored").inc()
            self.relay.wake()
            return
        await self._send(decision)

    async def _send(self, decision: Decision) -> None:
        item = await asyncio.to_thread(store.get_item, self.engine, decision.item_id)
        if item is None:
            raise TransientError(f"item {decision.item_id} not seen yet")
        request = ActionRequest(action=item.action, args=item.args)
        if decision.type == "edit":
            request = _edited(request, decision.args)
        text = str(request.args.get("reply") or "").strip()
        if not text:
            raise PermanentError("the decision leaves nothing to send")
        # the key comes from the item (its ticket and round) and the action it allows (its own,
        # or the reply on its ticket a person who took an escalation wrote), never from the edit
        key = ids.outbox(item.ticket_id or item.thread, item.round or "r1", request.action)
        outbox_only = self.channel is None
        subject = request.args.get("subject")
        row = store.OutboxRow(
            key=key,
            item_id=decision.item_id,
            thread=decision.thread,
            version=decision.version,
            ticket_id=item.ticket_id,
            action=request.action,
            final_text=text,
            model_draft=str(item.args.get("reply") or "") or None,
            decision_type=decision.type,
            reviewer=decision.reviewer,
            channel=self.channel_name,
            delivery="delivered" if outbox_only else "pending",
            created_at=store.now(),
            delivered_at=store.now() if outbox_only else None,
            round=item.round,
            subject=str(subject) if subject is not None else None,
            recipient=item.recipient,
            in_reply_to=item.in_reply_to,
            seen_through=item.seen_through,
            auto=decision.auto or None,
        )
        # One worker per key at a time (across replicas): a redelivery waits for a delivery in
        # flight instead of starting a second one; the UNIQUE key stops a second row.
        async with self.ledger.lease(f"outbox:{key}", ttl=self.lease_ttl, wait=self.lease_wait):
            existing = await asyncio.to_thread(store.get_outbox, self.engine, key)
            if decision.auto and existing is None:  # no person approved it: check its round
                refused = await self._not_for_auto(item, row.final_text)
                if refused is not None:
                    await self._refused(row, refused)
                    self.relay.wake()
                    return
            if existing is None:  # nothing written for the round yet: is this its recipient?
                refused = _not_to_the_author(item)
                if refused is not None:
                    await self._refused(row, refused)
                    self.relay.wake()
                    return
            if outbox_only:  # the commit is the delivery: check the ticket right before it
                reason = None if existing else await self._moved_on(item)
                if reason is not None:
                    await self._withdrawn(row, reason, new=True)
                    self.relay.wake()
                    return
                result = _result(REPLY_SENT, key, item.ticket_id, _reply_data(row))
            else:
                result = None
            await self._write_and_deliver(row, result, item)
        self.relay.wake()

    async def _record_reply(self, row: store.OutboxRow, item: store.ItemRow) -> None:
        """The sent reply in the ticket's conversation (idempotent: one message per key); a mail
        conversation is no helpdesk ticket (the drafter keeps its conversation)."""
        if self.recorder is None or not row.ticket_id or item.in_helpdesk is False:
            return
        message_id = f"{row.ticket_id}-desk-{row.round or 'r1'}"
        try:
            await self.recorder.record_reply(
                row.ticket_id, message_id, row.final_text, "The Support Team"
            )
        except PermanentError:
            log.warning("reply %s sent; its ticket is gone from the helpdesk", row.key)

    async def _moved_on(self, item: store.ItemRow) -> str | None:
        """Why this draft must not be sent any more, from the ticket as it is now; None if it
        still answers the conversation."""
        if self.source is None or item.in_helpdesk is False or not item.ticket_id:
            return None
        try:
            ticket = await self.source.get_ticket(item.ticket_id)
        except PermanentError:
            return "the ticket no longer exists in the helpdesk"
        change = conversation.change_since(ticket, item.seen_through)
        return conversation.REASONS[change] or None

    async def _not_for_auto(self, item: store.ItemRow, text: str) -> str | None:
        """Why an auto-sent decision must not be carried out (None: it may). No person approved
        it, and the item it sends is the word of whoever published it: its round must be a
        customer message of the ticket as the helpdesk lists it now, one not answered yet, and
        the newest message the draft saw must be the ticket's too; and the text is screened
        again against that conversation as the helpdesk has it (not the item's copy of it, which
        its publisher wrote). A mail conversation has no ticket to read again, so nothing
        auto-sent goes to one."""
        if item.in_helpdesk is False or not item.ticket_id:
            return "auto-send refused: a mail conversation has no ticket to check the round in"
        if self.source is None:
            return "auto-send refused: no helpdesk to check the round in"
        try:
            ticket = await self.source.get_ticket(item.ticket_id)
        except PermanentError:
            return "auto-send refused: the ticket does not exist in the helpdesk"
        waiting = conversation.open_round(ticket)
        rounds = {conversation.round_id(m.id) for m in waiting.messages} if waiting else set()
        if item.round not in rounds:
            return (
                f"auto-send refused: round {item.round} is no customer message of ticket "
                f"{item.ticket_id} waiting for an answer"
            )
        if item.seen_through not in {m.id for m in ticket.messages}:
            return f"auto-send refused: the draft saw a conversation ticket {item.ticket_id} lacks"
        said = (
            ticket.subject,
            ticket.customer.model_dump(),
            [m.model_dump() for m in ticket.messages],
        )
        found = await asyncio.to_thread(
            screening.screen,
            text,
            conversation=screening.conversation_texts(*said),
            knowledge=item.knowledge or [],
            customer=screening.customer_texts(*said),
        )
        if found:
            return "auto-send refused: " + "; ".join(found)
        return None

    async def _refused(self, row: store.OutboxRow, reason: str) -> None:
        """A decision the sender will not carry out (an auto-sent one whose round it cannot
        check, a reply to someone not the author of its round): nothing is sent, no outbox row
        takes the round (a person may still answer it), and `reply.failed` says why, so the
        team hears of it (the failed-replies alert) and answers the customer itself."""
        row.delivery = "failed"
        row.delivered_at = None
        result = _result(
            REPLY_FAILED, row.key, row.ticket_id, {**_reply_data(row), "error": reason}
        )
        if await asyncio.to_thread(store.record, self.engine, None, result):
            OUTCOMES.labels("failed").inc()
        log.warning("reply %s refused: %s", row.key, reason)

    async def _withdrawn(self, row: store.OutboxRow, reason: str, *, new: bool) -> None:
        """Nothing is sent for this round: the row says so, and `reply.withdrawn` says why."""
        row.delivery = "withdrawn"
        row.delivered_at = None
        result = _result(
            REPLY_WITHDRAWN, row.key, row.ticket_id, {**_reply_data(row), "reason": reason}
        )
        if new:
            row.last_error = reason
            if not await asyncio.to_thread(store.record, self.engine, row, result):
                raise TransientError(f"{row.key} was written meanwhile; looking again")
        else:
            await asyncio.to_thread(
                store.settle,
                self.engine,
                row.key,
                delivery="withdrawn",
                error=reason,
                result=result,
            )
        OUTCOMES.labels("withdrawn").inc()
        log.info("reply %s withdrawn: %s", row.key, reason)

    async def _write_and_deliver(
        self,
        row: store.OutboxRow,
        result: store.ResultRow | None,
        item: store.ItemRow,
    ) -> None:
        key = row.key
        created = await asyncio.to_thread(store.record, self.engine, row, result)
        if created and row.delivery == "delivered":
            await self._record_reply(row, item)
        if not created:
            existing = await asyncio.to_thread(store.get_outbox, self.engine, key)
            if existing is not None and existing.delivery == "delivered":
                await self._record_reply(existing, item)  # a crash may have come between
            if existing is None or existing.delivery in ("delivered", "failed", "withdrawn"):
                if existing is not None and existing.item_id != row.item_id:
                    await self._settled_by_another(row, existing)
                OUTCOMES.labels("already_sent").inc()
                raise BusinessReject(f"{key} was already sent", outcome="already_sent")
            row = existing  # pending or unknown: carry on delivering it
        else:
            OUTCOMES.labels("written").inc()
        if self.channel is not None:
            await self._deliver(row, item)

    async def _settled_by_another(self, row: store.OutboxRow, settled: store.OutboxRow) -> None:
        """An approved version of a round whose reply another version settled (a redraft
        approved while the earlier version's reply went out): nothing is sent, and
        `item.withdrawn` says so, so that the inbox shows why instead of waiting for a send."""
        outcome = {"delivered": "went out", "failed": "failed", "withdrawn": "was withdrawn"}
        reason = (
            f"the reply to this round {outcome[settled.delivery]} already, as "
            f"v{settled.version}: nothing more is sent for it"
        )
        result = _result(
            ITEM_WITHDRAWN,
            row.item_id,
            row.ticket_id or row.thread,
            {
                "item_id": row.item_id,
                "thread": row.thread,
                "round": row.round,
                "version": row.version,
                "ticket_id": row.ticket_id,
                "reason": reason,
            },
        )
        await asyncio.to_thread(store.record, self.engine, None, result)
        self.relay.wake()
        log.warning("reply %s v%s not sent: %s", row.key, row.version, reason)

    async def _deliver(self, row: store.OutboxRow, item: store.ItemRow) -> None:
        """One attempt at the channel. Delivered or refused (4xx) settles the round; anything
        else (an open breaker, the rate limit, 429/5xx, no connection) waits in place
        (`Unavailable`: no delivery attempt of the decision is spent) until the channel takes
        it or `delivery_deadline` has passed since the approval: then `reply.failed` says why.
        A reply whose request went out unanswered stays `unknown`, re-sent with the same
        Idempotency-Key until the channel answers; it is never reported as failed."""
        assert self.channel is not None
        if row.delivery == "pending":  # nothing went out yet: is the reply still right?
            reason = await self._moved_on(item)
            if reason is not None:
                await self._withdrawn(row, reason, new=False)
                return
        try:
            outcome = await self.channel.deliver(row)
        except Unavailable as exc:  # the breaker or the rate limit: no request was made
            outcome = Attempt("wait", None, 0, str(exc), exc.retry_after)
        DELIVERIES.labels(self.channel.name, outcome.outcome).inc()
        if outcome.outcome != "wait":
            await asyncio.to_thread(
                store.audit,
                self.engine,
                row.key,
                self.channel.name,
                status_code=outcome.status_code,
                duration_ms=outcome.duration_ms,
                outcome=outcome.outcome,
                error=outcome.error,
            )
        if outcome.outcome == "delivered":
            row.delivery = "delivered"
            await asyncio.to_thread(
                store.settle,
                self.engine,
                row.key,
                delivery="delivered",
                error=None,
                result=_result(REPLY_SENT, row.key, row.ticket_id, _reply_data(row)),
            )
            OUTCOMES.labels("sent").inc()
            return
        # once a request may have reached the channel, the reply's fate is unknown until the
        # channel answers a re-send with the same key
        maybe_sent = row.delivery == "unknown" or outcome.outcome == "unknown"
        if outcome.outcome == "failed":
            await self._failed(row, outcome.error or "refused")
            return
        if not maybe_sent and self._overdue(row):
            last = outcome.error or "no answer"
            if outcome.outcome == "wait" and row.last_error:  # what the channel itself said
                last = f"{last}, after: {row.last_error}"
            await self._failed(
                row,
                f"not delivered within DESK_DELIVERY_DEADLINE ({_duration(self.delivery_deadline)})"
                f"; last: {last}",
            )
            return
        status: store.DeliveryStatus = "unknown" if maybe_sent else "pending"
        if outcome.outcome != "wait" or row.delivery != status:  # a wait changes nothing
            await asyncio.to_thread(
                store.settle,
                self.engine,
                row.key,
                delivery=status,
                error=outcome.error,
                result=None,
            )
            row.delivery = status
        raise Unavailable(outcome.error or "delivery failed", retry_after=outcome.retry_after)

    def _overdue(self, row: store.OutboxRow) -> bool:
        approved = row.created_at
        approved = clock.aware(approved)  # SQLite keeps no zone: it was written in UTC
        return (store.now() - approved).total_seconds() > self.delivery_deadline

    async def _failed(self, row: store.OutboxRow, error: str) -> None:
        row.delivery = "failed"
        await asyncio.to_thread(
            store.settle,
            self.engine,
            row.key,
            delivery="failed",
            error=error,
            result=_result(
                REPLY_FAILED,
                row.key,
                row.ticket_id,
                {**_reply_data(row), "error": redact(error)},
            ),
        )
        OUTCOMES.labels("failed").inc()
        log.warning("reply %s failed: %s", row.key, redact(error))


def _duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g}h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g}min"
    return f"{seconds:g}s"


def _edited(current: ActionRequest, args: Any) -> ActionRequest:
    """The text (and subject) of an edit; its action and targets are the item's, or, for an
    escalation a person took, a reply on its ticket (`shared.edits`). The inbox refuses other
    edits (422); a decision that still tries is not carried out."""
    edited = ActionRequest.model_validate(args)
    try:
        return edits.edited(current, edited.action, edited.args)
    except edits.RefusedEdit as exc:
        raise PermanentError(str(exc)) from None


def _not_to_the_author(item: store.ItemRow) -> str | None:
    """Why the reply to a mail conversation must not go out (None: it may). It goes to the
    author of the round it answers and to nobody else: one plain address, the same (case and
    display name aside) as the newest mail of the round. (A helpdesk ticket's reply is
    addressed by the helpdesk itself.)"""
    if item.in_helpdesk is not False:
        return None
    recipient = (item.recipient or {}).get("email")
    if not mail.plain_address(recipient):
        return "refused: the reply names no single plain recipient address"
    if not item.round_author:
        return "refused: the round the reply answers names no author to send it to"
    if mail.normal_address(str(recipient)) != mail.normal_address(item.round_author):
        return "refused: the recipient is not the author of the round the reply answers"
    return None


def _excerpt(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
