"""Ranking texts by their words: what the knowledge base and the remembered replies rely on."""

from __future__ import annotations

import threading

import pytest

from shared import similarity

PASSAGES = [
    "Refunds are paid back to the card within five working days.",
    "Parcels ship from our warehouse every weekday before noon.",
    "Reset your password from the sign-in page.",
]


def test_the_best_match_first_and_none_without_a_shared_term() -> None:
    built = similarity.index(PASSAGES)

    found = similarity.retrieve(built, len(PASSAGES), "when is my refund paid", 3)

    assert [i for i, _ in found] == [
        0
    ]  # stemmed: "refund" finds "Refunds"; nothing else shares a term
    assert similarity.rank("my parcel has not shipped", PASSAGES, 2) == [1]
    assert similarity.retrieve(built, len(PASSAGES), "   ", 3) == []


def test_a_query_runs_in_the_calling_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """One query per draft, twice a draft: a thread started (and joined) for each is CPU the
    drafter's event loop then lacks."""
    built = similarity.index(PASSAGES)
    started: list[threading.Thread] = []
    start = threading.Thread.start

    def counted(self: threading.Thread) -> None:
        started.append(self)
        start(self)

    monkeypatch.setattr(threading.Thread, "start", counted)

    for _ in range(3):
        assert similarity.retrieve(built, len(PASSAGES), "password reset", 1)

    assert started == []
