"""What the inbox tells the others, each recorded first in its own tables (`shared.outbox`):

- **decisions** (`inbox.decision`): a reviewer's (or auto-send's) decision, with the item's
  round and version in its id (`ids.decision`), for the sender and the drafter;
- **audits** (`inbox.audited`): a person's audit of an auto-sent reply (`ids.audited`), for
  the drafter: a reply found fine becomes an example, one found edited does not (only sent
  replies are told);
- **notices** (`inbox.notice`): escalations and digests for the notifier, named by their key.

Each is published at once where it is made and, whatever the broker did then, by the relay's
next pass; each continues its item's trace and carries the correlation id of the event its
item descends from, so `desk trace` follows one webhook from its arrival to `reply.sent`.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence

from sqlalchemy.engine import Engine

from shared import ids, outbox, subjects
from shared.bus import Bus
from shared.envelope import Envelope
from shared.inbox import Audited, Decision, Notice
from shared.outbox import Message, Outbox, Relay

from . import store
from .standing import publish_standing

SOURCE = "/desk/inbox_api"


def decisions(engine: Engine) -> Outbox:
    return Outbox(
        "decision",
        pending=lambda: [
            decision_message(engine, d) for d in store.unpublished(engine, older_than=0)
        ],
        mark=functools.partial(_mark_decisions, engine),
    )


def audits(engine: Engine) -> Outbox:
    return Outbox(
        "audit",
        pending=lambda: [_audit_message(engine, a) for a in store.audits.unpublished(engine)],
        mark=functools.partial(_mark_each, store.audits.mark_published, engine),
    )


def notices(engine: Engine) -> Outbox:
    return Outbox(
        "notice",
        pending=lambda: [_notice_message(engine, n) for n in store.notices.unpublished(engine)],
        mark=functools.partial(_mark_each, store.notices.mark_published, engine),
    )


def relay(bus: Bus, engine: Engine) -> Relay:
    """Decisions first (a reply waits on them), then audits and notices."""
    return Relay(bus, decisions(engine), audits(engine), notices(engine), name="decision relay")


async def publish_decision(bus: Bus | None, engine: Engine, decision: Decision) -> bool:
    """Publish a decision just recorded; False leaves it for the relay to publish later."""
    message = await asyncio.to_thread(decision_message, engine, decision)
    if not await outbox.send(bus, decisions(engine), message):
        return False
    if decision.type == "response":  # it may have made a standing instruction
        await publish_standing(bus, engine)
    return True


async def publish_audits(bus: Bus | None, engine: Engine) -> None:
    """The audits just recorded (and any the broker did not take before)."""
    await outbox.drain(bus, audits(engine))


async def publish_notices(bus: Bus | None, engine: Engine) -> None:
    await outbox.drain(bus, notices(engine))


def decision_message(engine: Engine, decision: Decision) -> Message:
    """The decision continues the item's trace (the reviewer's request is not part of it)."""
    msg_id = ids.decision(decision.thread, decision.round, decision.version)
    key = (decision.thread, decision.version)
    return _told(engine, key, subjects.INBOX_DECISION, msg_id, decision.thread, decision)


def _audit_message(engine: Engine, audit: Audited) -> Message:
    msg_id = ids.audited(audit.thread, audit.round, audit.version)
    return _told(engine, audit.item_id, subjects.INBOX_AUDITED, msg_id, audit.thread, audit)


def _notice_message(engine: Engine, notice: Notice) -> Message:
    about = notice.item_id or notice.queue
    return _told(engine, notice.id, subjects.INBOX_NOTICE, notice.id, about, notice)


def _told(
    engine: Engine,
    key: object,
    subject: str,
    msg_id: str,
    about: str | None,
    told: Decision | Audited | Notice,
) -> Message:
    """`told` on `subject` under `msg_id`, continuing its item's trace and correlation."""
    item_id = told.item_id
    traceparent, origin = store.origin_of(engine, item_id) if item_id else (None, None)
    at = told.decided_at if isinstance(told, Decision) else told.at
    envelope = Envelope(
        id=msg_id,
        source=SOURCE,
        type=subject,
        subject=about,
        time=at,
        data=told.model_dump(mode="json"),
        correlationid=origin,
    )
    return Message(key, subject, envelope, traceparent)


def _mark_decisions(engine: Engine, keys: Sequence[tuple[str, int]]) -> None:
    for thread, version in keys:
        store.mark_published(engine, thread, version)


def _mark_each(mark: Callable[[Engine, str], None], engine: Engine, keys: Sequence[str]) -> None:
    for key in keys:
        mark(engine, key)
