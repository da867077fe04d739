"""The reply a decision approves, as its outbox row: the item's action with the decision's text
(or an edit's), under the outbox key of the item's round (pure: no I/O)."""

from __future__ import annotations

from typing import Any

from shared import edits, ids
from shared.errors import PermanentError
from shared.inbox import ActionRequest, Decision

from . import store


def outbox_row(
    decision: Decision, item: store.ItemRow, *, channel: str, outbox_only: bool
) -> store.OutboxRow:
    """The row to write for an accept or edit; `outbox_only`: the commit is the delivery."""
    request = ActionRequest(action=item.action, args=item.args)
    if decision.type == "edit":
        request = _edited(request, decision.args)
    text = str(request.args.get("reply") or "").strip()
    if not text:
        raise PermanentError("the decision leaves nothing to send")
    # the key comes from the item (its ticket and round) and the action it allows (its own,
    # or the reply on its ticket a person who took an escalation wrote), never from the edit
    key = ids.outbox(item.ticket_id or item.thread, item.round or "r1", request.action)
    subject = request.args.get("subject")
    return store.OutboxRow(
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
        channel=channel,
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


def _edited(current: ActionRequest, args: Any) -> ActionRequest:
    """The text (and subject) of an edit; its action and targets are the item's, or, for an
    escalation a person took, a reply on its ticket (`shared.edits`). The inbox refuses other
    edits (422); a decision that still tries is not carried out."""
    edited = ActionRequest.model_validate(args)
    try:
        return edits.edited(current, edited.action, edited.args)
    except edits.RefusedEdit as exc:
        raise PermanentError(str(exc)) from None
