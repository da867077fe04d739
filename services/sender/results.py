"""The results: how each round ends, as the outbox row's final state and its result event.

Every approved round ends in exactly one of `reply.sent`, `reply.withdrawn`, `reply.failed`;
an item nothing is sent for ends in `item.ignored` or `item.withdrawn`. A result event is
written in the same transaction as the row it settles (the transactional outbox); the relay
publishes it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from sqlalchemy.engine import Engine

from shared.errors import TransientError
from shared.inbox import Decision, Withdrawal
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

from . import store
from .metrics import OUTCOMES

log = logging.getLogger(__name__)


class Results:
    def __init__(self, engine: Engine, relay: Relay) -> None:
        self.engine = engine
        self.relay = relay

    async def item_withdrawn(self, notice: Withdrawal) -> None:
        """The drafter took a waiting draft back: publish `item.withdrawn`, once."""
        await asyncio.to_thread(
            store.record, self.engine, None, _item_withdrawn(notice, notice.reason)
        )
        OUTCOMES.labels("item_withdrawn").inc()
        self.relay.wake()

    async def ignored(self, decision: Decision) -> None:
        """A reviewer ignored the item: nothing is sent, and `item.ignored` says so."""
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

    async def refused(self, row: store.OutboxRow, reason: str) -> None:
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

    async def withdrawn(self, row: store.OutboxRow, reason: str, *, new: bool) -> None:
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

    async def delivered(self, row: store.OutboxRow) -> None:
        row.delivery = "delivered"
        await asyncio.to_thread(
            store.settle,
            self.engine,
            row.key,
            delivery="delivered",
            error=None,
            result=reply_sent(row),
        )
        OUTCOMES.labels("sent").inc()

    async def failed(self, row: store.OutboxRow, error: str) -> None:
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

    async def settled_by_another(self, row: store.OutboxRow, settled: store.OutboxRow) -> None:
        """An approved version of a round whose reply another version settled (a redraft
        approved while the earlier version's reply went out): nothing is sent, and
        `item.withdrawn` says so, so that the inbox shows why instead of waiting for a send."""
        outcome = {"delivered": "went out", "failed": "failed", "withdrawn": "was withdrawn"}
        reason = (
            f"the reply to this round {outcome[settled.delivery]} already, as "
            f"v{settled.version}: nothing more is sent for it"
        )
        await asyncio.to_thread(store.record, self.engine, None, _item_withdrawn(row, reason))
        self.relay.wake()
        log.warning("reply %s v%s not sent: %s", row.key, row.version, reason)


def reply_sent(row: store.OutboxRow) -> store.ResultRow:
    """`reply.sent` for `row`, delivered."""
    return _result(REPLY_SENT, row.key, row.ticket_id, _reply_data(row))


def _result(kind: str, key: str, subject: str | None, data: dict[str, Any]) -> store.ResultRow:
    return store.ResultRow(
        id=event_id(kind, key), type=kind, subject=subject, data=data, created_at=store.now()
    )


def _item_withdrawn(of: Withdrawal | store.OutboxRow, reason: str) -> store.ResultRow:
    """`item.withdrawn` for the item a drafter's notice or an outbox row names."""
    return _result(
        ITEM_WITHDRAWN,
        of.item_id,
        of.ticket_id or of.thread,
        {
            "item_id": of.item_id,
            "thread": of.thread,
            "round": of.round,
            "version": of.version,
            "ticket_id": of.ticket_id,
            "reason": reason,
        },
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
