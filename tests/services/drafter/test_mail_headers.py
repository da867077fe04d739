"""A mail event reaches its conversation as one line and one sender, and a conversation is
named by its first sender: two senders never share one by choosing the same Message-ID."""

from __future__ import annotations

import datetime as dt

import pytest

from services.drafter.threads import work_for
from shared.envelope import Envelope
from shared.errors import PermanentError


def mail_event(**fields: object) -> Envelope:
    body = {"MessageID": "<m1@x>", "Subject": "Hi", "TextBody": "Help", **fields}
    return Envelope(
        id="email:m1",
        source="email",
        type="email.received",
        data=body,
        time=dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC),
    )


def test_a_mail_event_reaches_its_conversation_as_one_line_and_one_sender() -> None:
    """The `email` webhook source stores what the provider sent: the drafter takes it in."""
    work = work_for(mail_event(From="Eve\u2028X <eve@example.com>", Subject="Hi\r\nBcc: x@y"))
    assert work.inline_ticket is not None
    assert work.inline_ticket["subject"] == "Hi Bcc: x@y"
    assert work.inline_ticket["customer"]["email"] == "eve@example.com"
    assert work.inline_ticket["messages"][0]["author_email"] == "eve@example.com"
    assert work.mail_from == "eve@example.com"
    for sender in ("jane@example.com, mallory@evil.example", "Eve\r\nBcc: x@y <eve@example.com>"):
        with pytest.raises(PermanentError, match="From"):
            work_for(mail_event(From=sender))


def test_two_senders_never_share_a_conversation_by_choosing_one_message_id() -> None:
    jane = work_for(mail_event(From="jane@example.com"))
    mallory = work_for(mail_event(From="mallory@evil.example"))
    again = work_for(mail_event(From="Jane D. <JANE@example.com>"))
    assert jane.thread != mallory.thread
    assert jane.thread == again.thread  # the same sender, case and name aside


def test_a_mail_stored_without_its_body_says_so_to_the_reviewer() -> None:
    stand_in = {"reason": "too_large", "size": 2_100_000, "body": "not stored"}
    work = work_for(mail_event(From="big@example.com", Quarantined=stand_in))
    assert work.notes == (
        "the mail's body was not stored (too_large, 2100000 bytes): read it in the mailbox",
    )
    assert work.start()["notes"] == list(work.notes)  # the draft's warnings begin with it
    assert work_for(mail_event(From="jane@example.com")).notes == ()
