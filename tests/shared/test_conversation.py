"""Rounds, waiting and changes of a conversation (shared/conversation.py: pure, no I/O)."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from shared.conversation import (
    REASONS,
    change_since,
    followup_round,
    newest_message,
    open_round,
    round_id,
    waiting_on_customer,
)
from shared.helpdesk import Customer, Message, Ticket
from shared.helpdesk.base import AuthorKind, TicketStatus

START = dt.datetime(2026, 11, 20, 9, 0, tzinfo=dt.UTC)
TOKEN = re.compile(r"[A-Za-z0-9_\-]{1,64}")


def ticket(
    *authors: AuthorKind, status: TicketStatus = "open", named: list[str] | None = None
) -> Ticket:
    """A ticket whose conversation has one message per author, `m1`, `m2`, … one minute apart."""
    names = named or [f"m{n}" for n in range(1, len(authors) + 1)]
    messages = [
        Message(id=i, author=a, body=f"{a} says {i}", created_at=START + dt.timedelta(minutes=n))
        for n, (i, a) in enumerate(zip(names, authors, strict=True))
    ]
    return Ticket(
        id="T1",
        customer=Customer(id="C1", name="Ana", email="ana@example.com"),
        subject="Help",
        body=messages[0].body if messages else "Help!",
        status=status,
        created_at=START,
        updated_at=messages[-1].created_at if messages else START,
        messages=messages,
    )


def round_of(t: Ticket, covered: str | None = None) -> list[str] | None:
    found = open_round(t, covered=covered)
    return None if found is None else found.message_ids


def test_the_opening_message_is_the_first_round() -> None:
    t = ticket("customer")
    found = open_round(t)
    assert found is not None
    assert (found.id, found.kind, found.message_ids) == ("m1", "answer", ["m1"])
    assert found.newest == t.messages[0]


def test_a_ticket_given_without_messages_opens_with_its_body() -> None:
    t = Ticket.model_validate(
        {
            "id": "T7",
            "customer": {"id": "C1", "name": "Ana", "email": "ana@example.com"},
            "subject": "Help",
            "body": "My order never came.",
            "status": "open",
            "created_at": START.isoformat(),
            "updated_at": START.isoformat(),
        }
    )
    found = open_round(t)
    assert found is not None and found.id == "T7-m1"
    assert (found.messages[0].body, found.messages[0].author_name) == (
        "My order never came.",
        "Ana",
    )


def test_a_round_is_what_the_customer_wrote_since_the_last_agent_message() -> None:
    assert round_of(ticket("customer", "customer")) == ["m1", "m2"]
    assert round_of(ticket("customer", "agent", "customer")) == ["m3"]
    assert round_of(ticket("customer", "agent", "customer", "customer")) == ["m3", "m4"]
    assert round_of(ticket("customer", "agent", "customer", "agent", "customer")) == ["m5"]
    assert round_of(ticket("customer", "agent")) is None
    assert round_of(ticket("customer", "agent", "agent")) is None


def test_the_round_id_is_its_newest_customer_message() -> None:
    first = open_round(ticket("customer", "customer"))
    second = open_round(ticket("customer", "customer", "agent", "customer"))
    assert first is not None and second is not None
    assert (first.id, second.id) == ("m2", "m4")
    # the same conversation read twice (a redelivery, a second replica): the same round
    assert open_round(ticket("customer", "customer")) == first


def test_notes_are_neither_the_customer_nor_a_reply() -> None:
    assert round_of(ticket("customer", "note")) == ["m1"]
    assert round_of(ticket("customer", "note", "customer")) == ["m1", "m3"]
    assert round_of(ticket("customer", "agent", "note", "customer")) == ["m4"]
    assert round_of(ticket("customer", "agent", "note")) is None
    assert round_of(ticket("note")) is None


def test_covered_messages_need_no_second_reply() -> None:
    # we answered m1 (the outbox does not write to the helpdesk): only m2 is left
    t = ticket("customer", "customer")
    assert round_of(t, covered="m1") == ["m2"]
    assert getattr(open_round(t, covered="m1"), "id", None) == "m2"
    assert round_of(t, covered="m2") is None
    assert round_of(ticket("customer"), covered="m1") is None
    # an agent message after what we covered still starts the round after it
    assert round_of(ticket("customer", "customer", "agent", "customer"), covered="m1") == ["m4"]
    # a covered id the helpdesk no longer lists covers nothing
    assert round_of(t, covered="gone") == ["m1", "m2"]
    assert round_of(t, covered=None) == ["m1", "m2"]


def test_waiting_on_the_customer() -> None:
    assert waiting_on_customer(ticket("customer", "agent"))
    assert waiting_on_customer(ticket("customer", "agent", "note"))  # a note says nothing to them
    assert not waiting_on_customer(ticket("customer"))
    assert not waiting_on_customer(ticket("customer", "agent", "customer"))
    assert not waiting_on_customer(ticket("note"))


def test_what_changed_since_the_draft() -> None:
    t = ticket("customer", "customer")
    assert change_since(t, "m2") == "none"
    assert change_since(ticket("customer", "customer", "note"), "m2") == "none"
    assert change_since(ticket("customer", "customer", "customer"), "m2") == "customer_wrote"
    assert change_since(ticket("customer", "customer", "agent"), "m2") == "answered"
    # a person answered and the customer wrote back: the person's answer is what matters
    assert change_since(ticket("customer", "agent", "customer"), "m1") == "answered"
    assert change_since(ticket("customer", "customer", status="closed"), "m2") == "closed"
    assert change_since(ticket("customer", "customer", "agent", status="closed"), "m2") == "closed"
    # a message no longer listed, or none named: only the status can tell
    assert change_since(ticket("customer", "agent"), "gone") == "none"
    assert change_since(ticket("customer", "agent"), None) == "none"
    assert change_since(ticket("customer", status="closed"), None) == "closed"
    assert all(REASONS[c] for c in ("closed", "answered", "customer_wrote"))
    assert REASONS["none"] == ""


def test_newest_message() -> None:
    assert newest_message(ticket("customer", "agent", "note")) == "m3"
    assert newest_message(ticket("customer")) == "m1"


@pytest.mark.parametrize(
    "message_id",
    [
        "<CAF=abc.123@mail.example.com>",  # an e-mail Message-ID
        "T1012/m2",
        "m 2",
        "m.2",
        "m2\n",  # a trailing newline is not part of a token
        "\nm2",
        "x" * 65,
        "nachricht-ü",
        "h0123456789abcdef0123",  # looks like a hash: hashed, so no hash can equal it
    ],
)
def test_odd_message_ids_give_stable_token_safe_round_ids(message_id: str) -> None:
    made = round_id(message_id)
    assert TOKEN.fullmatch(made) and made != message_id
    assert round_id(message_id) == made  # stable: the same in every process and replica


def test_plain_message_ids_are_their_own_round_ids() -> None:
    for message_id in ("T1012-m2", "m1", "12345", "a_b-C", "x" * 64):
        assert round_id(message_id) == message_id


def test_different_odd_ids_give_different_rounds() -> None:
    odd = ["<a@x>", "<b@x>", "<a@x> ", "a.b", "a b", "m2\n", "h0123456789abcdef0123"]
    made = [round_id(i) for i in odd]
    assert len(set(made)) == len(odd)
    assert not set(made) & set(odd)


def test_a_round_answering_an_odd_id_is_token_safe() -> None:
    t = ticket("customer", "agent", "customer", named=["<1@mail>", "<2@mail>", "<3@mail>"])
    found = open_round(t)
    assert found is not None and found.message_ids == ["<3@mail>"]
    assert found.id == round_id("<3@mail>") and TOKEN.fullmatch(found.id)


def test_followup_rounds_are_one_per_day() -> None:
    assert followup_round(dt.date(2026, 12, 1)) == "followup-2026-12-01"
    assert followup_round(dt.date(2026, 12, 1)) != followup_round(dt.date(2026, 12, 2))
    assert TOKEN.fullmatch(followup_round(dt.date(2026, 12, 1)))
