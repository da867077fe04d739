"""The knowledge base's relevance floor: a ticket the articles say nothing about is offered no
passage at all (the review's tickets of the demo helpdesk, the issue's examples), while the
tickets they answer still get theirs; with no passage offered the model is told to make no
policy statement; `benchmarks.retrieval` prints the precision and recall of "an article
applies" at the floor."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks import retrieval
from desk.helpdesk import DEMO_KNOWLEDGE
from services.drafter import prompt
from services.drafter.knowledge import Knowledge, retriever_of
from shared.conversation import open_round
from shared.helpdesk.demo import TICKETS


def demo_round(ticket_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A demo helpdesk ticket as the drafter reads it, and its open round."""
    [ticket] = [t for t in TICKETS if t.id == ticket_id]
    waiting = open_round(ticket)
    assert waiting is not None, ticket_id
    return ticket.model_dump(mode="json"), {"messages": waiting.message_ids, "kind": waiting.kind}


@pytest.fixture(scope="module")
def knowledge() -> Knowledge:
    return Knowledge(DEMO_KNOWLEDGE)


@pytest.mark.parametrize("ticket_id", ["T1003", "T1036", "T1021", "T1028", "T1031", "T1035"])
def test_the_reviews_tickets_are_offered_no_off_topic_policy(
    knowledge: Knowledge, ticket_id: str
) -> None:
    # a photo-upload crash, "please delete my account", an iOS crash, an expired invite, a
    # discount code, a sync problem: the demo's articles say nothing about any of them
    assert knowledge.search(prompt.query(*demo_round(ticket_id)), k=3) == []


@pytest.mark.parametrize(
    ("subject", "body"),
    [
        ("App crashes", "The app crashes every time I try to upload a photo from my gallery."),
        ("Please delete my account", "I'd like my account and all my data deleted."),
        ("Discount code not applied", "The code WELCOME15 was accepted but the total is the same."),
    ],
)
def test_the_issues_examples_get_no_passage(knowledge: Knowledge, subject: str, body: str) -> None:
    ticket = {"subject": subject, "body": body, "messages": []}
    assert knowledge.search(prompt.query(ticket), k=3) == []


@pytest.mark.parametrize(
    ("ticket_id", "article"),
    [
        ("T1012", "duplicate-charges"),
        ("T1005", "password-and-login-email"),
        ("T1014", "two-factor-and-lockouts"),
        ("T1007", "shipping"),
        ("T1010", "exports"),
    ],
)
def test_the_tickets_an_article_answers_still_get_it(
    knowledge: Knowledge, ticket_id: str, article: str
) -> None:
    ticket, round_ = demo_round(ticket_id)
    found = knowledge.scored(prompt.query(ticket, round_), k=3)
    assert found and found[0][0].article == article
    assert all(0 < score <= 1 for _, score in found)


def test_with_no_passage_offered_the_model_is_told_to_make_no_policy_statement(
    knowledge: Knowledge,
) -> None:
    ticket, round_ = demo_round("T1036")
    passages = knowledge.search(prompt.query(ticket, round_))
    [system, human] = prompt.messages(ticket, [], None, round_, passages)
    assert "make no policy statement" in str(system.content)
    assert "ask the customer for what the team needs" in str(system.content)
    assert "<knowledge>" not in str(human.content)
    ticket, round_ = demo_round("T1012")
    passages = knowledge.search(prompt.query(ticket, round_))
    [system, human] = prompt.messages(ticket, [], None, round_, passages)
    assert "make no policy statement" not in str(system.content)
    assert "<knowledge>" in str(human.content)


def test_the_benchmark_prints_precision_and_recall_at_the_floor(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bm25 = Knowledge(DEMO_KNOWLEDGE, retriever=retriever_of("bm25", floor=0))
    # the embeddings' model takes seconds to load: BM25 alone here
    monkeypatch.setattr(retrieval, "retrievers", lambda root: [("bm25", 0.4, bm25)])
    assert retrieval.main([]) == 0
    out = capsys.readouterr().out
    [chosen] = [line for line in out.splitlines() if "(default)" in line]
    assert "floor 0.40  precision 100.0%" in chosen, out
    assert "recall" in chosen
    assert out.count("precision") == len(retrieval.SWEEP)


def test_a_number_word_is_no_topic(knowledge: Knowledge) -> None:
    """ "two" is half of "two-factor" in the 2FA article, and says nothing of a money ticket."""
    found = [p.article for p in knowledge.search("you took my money two times", k=3)]
    assert "two-factor-and-lockouts" not in found
