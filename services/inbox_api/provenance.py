"""Where an item comes from, as the broker recorded it: before auto-send sends a draft, the inbox
reads the work message the item's trigger names from WORK and believes that, not the item.

Whoever may publish `inbox.item` (the drafter, or its leaked credentials) can write any item;
only the router writes `work.drafter.*`. So auto-send applies only when the trigger's
`work_seq` names a message WORK holds, on a `work.drafter.<type>` subject, that is the router's
work about the trigger's event (its `Nats-Msg-Id`, or the original's on a replayed copy, and its
envelope agree with the trigger), about this item's ticket, and in the category the draft claims
— the category a routing rule gave the ticket (`category` in the rules), which the customer's
words never set. A follow-up, which answers no customer message, and a mail conversation, which
has no ticket the sender could check the round against, are not for auto-send at all.

`doubts` is pure: every reason it finds is one the item waits for a person for, shown to the
reviewer among its warnings.
"""

from __future__ import annotations

import nats.errors
import nats.js.errors as js_errors
from nats.js.api import RawStreamMsg
from pydantic import ValidationError

from shared import headers as h
from shared import ids, subjects
from shared.bus import BrokerCode, Bus
from shared.catalog import matches
from shared.envelope import Envelope
from shared.errors import TransientError
from shared.helpdesk.events import ticket_ref
from shared.inbox import InboxItem

DRAFTER = "drafter"  # the router's target whose work becomes drafts


async def work_message(bus: Bus | None, seq: int | None) -> RawStreamMsg | None:
    """The message WORK holds at `seq`; None when there is none (or nothing to read with)."""
    if bus is None or seq is None:
        return None
    try:
        return await bus.js.get_msg(subjects.WORK, seq=seq)
    except js_errors.NotFoundError as exc:
        if exc.err_code == BrokerCode.NO_MESSAGE_FOUND:
            return None
        raise TransientError(f"WORK cannot be read: {exc}") from None
    except nats.errors.Error as exc:  # a timeout, a lost connection: the item is tried again
        raise TransientError(f"WORK message {seq} not read: {exc.__class__.__name__}") from None


def doubts(item: InboxItem, stored: RawStreamMsg | None) -> list[str]:
    """Why auto-send must not send `item`, judged by the work message `stored` (what WORK holds
    at the trigger's `work_seq`); empty when the item is what the router's work asked for."""
    if item.round_kind != "answer" or not item.round_messages:
        return ["auto-send: a follow-up answers no customer message"]
    if not item.in_helpdesk:
        return ["auto-send: a mail conversation has no helpdesk ticket to check the round against"]
    trigger = item.trigger
    if trigger.work_seq is None:
        return ["auto-send: the draft names no work message it answers"]
    if stored is None or not stored.subject:
        return [f"auto-send: WORK holds no message {trigger.work_seq}"]
    if not matches(subjects.work_for(DRAFTER), stored.subject):
        return [f"auto-send: WORK message {trigger.work_seq} is no work for the drafter"]
    told = {k.lower(): v for k, v in (stored.headers or {}).items()}
    expected = ids.router(trigger.event_id, DRAFTER)
    if expected not in (told.get(h.MSG_ID.lower()), told.get(h.ORIGINAL_MSG_ID.lower())):
        return [f"auto-send: WORK message {trigger.work_seq} is about another event"]
    try:
        work = Envelope.model_validate_json(stored.data or b"")
    except ValidationError:
        return [f"auto-send: WORK message {trigger.work_seq} is not a work item"]
    if (work.id, work.source, work.type) != (trigger.event_id, trigger.source, trigger.type) or (
        stored.subject != subjects.work(DRAFTER, work.type)
    ):
        return [f"auto-send: WORK message {trigger.work_seq} is about another event"]
    ref = ticket_ref(work.data)
    if ref is None or not item.ticket_id or ref.ticket_id != item.ticket_id:
        return [f"auto-send: WORK message {trigger.work_seq} is about another ticket"]
    if item.thread != item.ticket_id:
        return ["auto-send: the draft's conversation is not its ticket's"]
    given = (work.model_extra or {}).get("category")
    if given is None:
        return ["auto-send: the routing rules gave this ticket no category"]
    if given != item.category:
        return [f"auto-send: the routing rules gave this ticket {given!r}, not {item.category!r}"]
    return []
