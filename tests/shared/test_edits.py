"""What an edit may make of an item's action request (the inbox and the sender both apply it)."""

from __future__ import annotations

import pytest

from shared.edits import RefusedEdit, edited
from shared.inbox import ActionRequest

DRAFT = ActionRequest(
    action="send_reply", args={"ticket_id": "T1", "subject": "Re: help", "reply": "Hi"}
)
ESCALATION = ActionRequest(
    action="notify_supervisor",
    args={"ticket_id": "T1027", "reason": "escalation words", "matched": ["lawyer"]},
)


def test_an_edit_of_a_draft_changes_its_text_and_keeps_its_target() -> None:
    made = edited(DRAFT, None, {"reply": "Hello"})
    assert made == ActionRequest(
        action="send_reply", args={"ticket_id": "T1", "subject": "Re: help", "reply": "Hello"}
    )
    assert edited(DRAFT, "send_reply", {**DRAFT.args, "reply": "Hello"}) == made


def test_a_taken_escalation_becomes_a_reply_on_its_own_ticket_and_nothing_else() -> None:
    expected = ActionRequest(action="send_reply", args={"ticket_id": "T1027", "reply": "Dear"})
    assert edited(ESCALATION, None, {"reply": "Dear"}) == expected
    assert edited(ESCALATION, "send_reply", {"ticket_id": "T1027", "reply": "Dear"}) == expected
    with pytest.raises(RefusedEdit, match="is a send_reply"):
        edited(ESCALATION, "notify_supervisor", {"reply": "Dear"})
    with pytest.raises(RefusedEdit, match="ticket_id"):
        edited(ESCALATION, "send_reply", {"ticket_id": "T1003", "reply": "Dear"})
    with pytest.raises(RefusedEdit, match="action"):
        edited(ESCALATION, "close_ticket", {"reply": "Dear"})
    with pytest.raises(RefusedEdit, match="action"):
        edited(DRAFT, "notify_supervisor", {"reply": "Dear"})
    with pytest.raises(RefusedEdit, match="to"):
        edited(ESCALATION, "send_reply", {"reply": "Dear", "to": "x@example.com"})
