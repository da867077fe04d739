"""The offline model (the embedded default with no LLM endpoint) says only what it knows: with
no passage offered it makes no policy statement, says what the team will do and asks what it
needs; it never pastes a passage it was not offered; it answers the round's newest question;
and it follows the reviewers' simple instructions without ever copying them into the reply."""

from __future__ import annotations

import re
from typing import Any

import pytest

from desk.helpdesk import DEMO_KNOWLEDGE
from services.drafter import checks, prompt
from services.drafter.knowledge import Knowledge, Passage
from services.drafter.offline import compose

from .test_floor import demo_round

QUOTE_WORDS = 8  # words in a row of a passage that make a quotation of it


@pytest.fixture(scope="module")
def knowledge() -> Knowledge:
    return Knowledge(DEMO_KNOWLEDGE)


def quoted(reply: str, passages: list[Passage]) -> set[str]:
    """The articles whose passages `reply` repeats `QUOTE_WORDS` words in a row."""
    said = [w.lower() for w in re.findall(r"\w+", reply)]
    runs = {tuple(said[n : n + QUOTE_WORDS]) for n in range(len(said) - QUOTE_WORDS + 1)}
    found = set()
    for p in passages:
        words = [w.lower() for w in re.findall(r"\w+", p.text)]
        if any(tuple(words[n : n + QUOTE_WORDS]) in runs for n in range(len(words))):
            found.add(p.article)
    return found


def drafted(
    knowledge: Knowledge,
    ticket: dict[str, Any],
    round_: dict[str, Any] | None = None,
    feedback: list[str] | None = None,
    instructions: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """The offline draft for `ticket`, given what the drafter's search offers."""
    passages = knowledge.search(prompt.query(ticket, round_), k=3)
    asked = prompt.messages(ticket, feedback or [], None, round_, passages, None, instructions)
    return compose(str(asked[-1].content))


def conversation(subject: str, *said: tuple[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A ticket of `said` ((author, text), oldest first) and the round of its last customer
    messages."""
    messages = [
        {"id": f"T7-m{n}", "author": author, "body": text}
        for n, (author, text) in enumerate(said, start=1)
    ]
    waiting: list[str] = []
    for m in reversed(messages):
        if m["author"] != "customer":
            break
        waiting.insert(0, m["id"])
    ticket = {"id": "T7", "customer": {"name": "Jonas"}, "subject": subject, "messages": messages}
    return ticket, {"messages": waiting}


@pytest.mark.parametrize(
    ("ticket_id", "team", "asks"),
    [
        ("T1003", "engineering team", "screenshot"),
        ("T1028", "engineering team", "app version"),
        ("T1036", "account team", "email address registered"),
        ("T1041", "billing team", None),
    ],
)
def test_with_no_passage_it_says_what_the_team_does_and_asks_what_it_needs(
    knowledge: Knowledge, ticket_id: str, team: str, asks: str | None
) -> None:
    draft = drafted(knowledge, *demo_round(ticket_id))
    reply = draft["reply"]
    assert draft["sources"] == []
    assert not quoted(reply, knowledge.passages), reply  # no policy of any article
    assert not re.search(r"refund|business days|within \d|two-factor", reply, re.I), reply
    assert team in reply
    if asks:
        assert asks in reply


def test_it_never_pastes_a_passage_that_was_not_offered(knowledge: Knowledge) -> None:
    ticket = {
        "id": "T1",
        "customer": {"name": "Mia Larsen"},
        "subject": "Refund not received yet",
        "body": "You confirmed my refund but it still hasn't reached my account. How long?",
        "messages": [],
    }
    given = knowledge.search(prompt.query(ticket), k=3)
    assert given  # the refund article answers it
    with_it = compose(str(prompt.messages(ticket, [], passages=given)[-1].content))
    assert with_it["sources"] == ["refunds"] and quoted(with_it["reply"], given) == {"refunds"}
    without = compose(str(prompt.messages(ticket, [])[-1].content))
    assert without["sources"] == [] and not quoted(without["reply"], knowledge.passages)


def test_it_answers_the_rounds_newest_question(knowledge: Knowledge) -> None:
    older = "You confirmed my refund on Monday. How long does a refund take to reach my bank?"
    newest = (
        "It has now been more than 10 business days since your confirmation and my bank sees "
        "nothing. Can you send me the refund's reference so my bank can trace it?"
    )
    ticket, round_ = conversation("Refund not received", ("customer", older), ("customer", newest))
    draft = drafted(knowledge, ticket, round_)
    reply = " ".join(draft["reply"].split())
    assert draft["sources"] == ["refunds"]
    assert "trace it?”" in reply  # the question it answers is the newest one
    assert "reference (ARN)" in reply  # and the article's answer to it


def test_feedback_is_followed_never_pasted(knowledge: Knowledge) -> None:
    ticket, round_ = conversation(  # a later round: the draft says "we will follow up"
        "Refund not received yet",
        ("customer", "Where is my refund?"),
        ("agent", "We confirmed it on Monday."),
        ("customer", "How long does a refund take?"),
    )
    feedback = [
        "Do not write 'We will follow up on it in this conversation'.",
        "Say that the refund reference will be sent to them by Friday.",
        "Apologise for the delay.",
    ]
    before = drafted(knowledge, ticket, round_)["reply"]
    assert "We will follow up on it in this conversation" in before
    reply = drafted(knowledge, ticket, round_, feedback)["reply"]
    assert "follow up" not in reply
    assert "The refund reference will be sent to you by Friday." in reply
    assert "I am sorry for the trouble this has caused." in reply
    for text in feedback:
        assert text not in reply and text.rstrip(".") not in reply
    assert not re.search(r"\b(?:do not write|say that|apologise)\b", reply, re.I), reply
    assert checks.repeated_guidance(reply, feedback) == []


def test_standing_instructions_are_followed_never_pasted(knowledge: Knowledge) -> None:
    ticket, round_ = demo_round("T1003")
    instructions = {
        "bug": ["Apologise for the trouble.", "Tell the customer that we test every fix."],
        "refund": ["Say that refunds take 5 business days."],  # another category's
    }
    draft = drafted(knowledge, ticket, round_, instructions=instructions)
    reply = draft["reply"]
    assert "I am sorry for the trouble this has caused." in reply
    assert "We test every fix." in reply
    assert "5 business days" not in reply and "Tell the customer" not in reply
    standing = [t for texts in instructions.values() for t in texts]
    assert checks.repeated_guidance(reply, [], standing) == []


def test_an_instruction_it_cannot_follow_is_named_in_the_summary_not_the_reply(
    knowledge: Knowledge,
) -> None:
    ticket, round_ = demo_round("T1041")
    feedback = ["Check the customer's plan history in the admin panel before answering."]
    draft = drafted(knowledge, ticket, round_, feedback)
    assert "admin panel" not in draft["reply"]
    assert "not applied: 1 instruction" in draft["summary"]


def test_the_facts_quoted_are_those_the_newest_message_is_about(knowledge: Knowledge) -> None:
    """A question that names nothing ("What now?") is answered from what the message says."""
    ticket, round_ = conversation(
        "Still no refund after two weeks",
        ("customer", "My lamp arrived damaged."),
        ("agent", "We have confirmed the refund."),
        (
            "customer",
            "It has been more than 10 business days since your confirmation and nothing is on "
            "my statement. What now?",
        ),
    )
    draft = drafted(knowledge, ticket, round_)
    assert draft["sources"] == ["refunds"]
    assert "reference (ARN)" in " ".join(draft["reply"].split())
