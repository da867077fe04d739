"""The knowledge base: the demo's articles are found for the tickets they answer, changes on
disk are picked up without a restart, a bad article costs only itself; the drafter gives the
passages to the model as data and the draft's citations reach the item; a draft citing an
article it was not given is redrafted, then reviewed with a warning; the offline model answers
with the best passage's facts and cites it."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from desk.helpdesk import DEMO_KNOWLEDGE
from services.drafter import offline, prompt
from services.drafter.knowledge import Knowledge, KnowledgeError, parse
from shared.bus import Bus
from shared.helpdesk.sql import SqlSource
from shared.http import HttpServer
from standins.llm import FakeLLM, default_responder
from tests.helpdesk_server import TOKEN, helpdesk_app
from tests.helpers import eventually

from .conftest import Harness, items, send_event

ARTICLE = """---
title: {title}
category: {category}
tags: [{tags}]
---

# {section}

{body}
"""


def article(path: Path, title: str, body: str, *, category: str = "other", tags: str = "") -> None:
    path.write_text(
        ARTICLE.format(title=title, category=category, tags=tags, section=title, body=body)
    )


@pytest.mark.parametrize(
    ("subject", "body", "expected"),
    [
        (
            "Refund not received yet",
            "You confirmed my refund on November 1st but it still hasn't reached my account. "
            "How long does it usually take?",
            ("refunds", "How long a refund takes"),
        ),
        (
            "Charged twice for my subscription",
            "I was charged twice for my October subscription. Please refund the duplicate.",
            ("duplicate-charges", "Two settled charges"),
        ),
        (
            "VAT number missing from invoice",
            "Could you reissue the invoice with our VAT number included?",
            ("invoices", "VAT, GST and other tax numbers"),
        ),
        (
            "Do you ship to Switzerland?",
            "Are customs fees included in the price?",
            ("shipping", None),
        ),
    ],
)
def test_the_demo_articles_are_found_for_the_tickets_they_answer(
    subject: str, body: str, expected: tuple[str, str | None]
) -> None:
    ticket = {"subject": subject, "body": body, "messages": []}
    [best, *_] = Knowledge(DEMO_KNOWLEDGE).search(prompt.query(ticket), k=3)
    assert best.article == expected[0]
    if expected[1]:
        assert best.section == expected[1]


def test_changes_on_disk_are_picked_up_without_a_restart(tmp_path: Path) -> None:
    article(tmp_path / "returns.md", "Returns", "Returns are accepted within 30 days.")
    knowledge = Knowledge(tmp_path, recheck=0)
    assert [p.article for p in knowledge.search("can I return it")] == ["returns"]
    article(tmp_path / "warranty.md", "Warranty", "Every kettle has a two-year warranty.")
    assert [p.article for p in knowledge.search("kettle warranty")] == ["warranty"]
    article(tmp_path / "warranty.md", "Warranty", "Every toaster has a two-year warranty.")
    assert knowledge.search("kettle") == []
    assert [p.article for p in knowledge.search("toaster")] == ["warranty"]
    (tmp_path / "returns.md").unlink()
    assert knowledge.search("return") == [] and knowledge.articles() == {"warranty"}


def test_a_search_answers_at_once_only_when_nothing_is_to_be_read_or_rebuilt(
    tmp_path: Path,
) -> None:
    """The drafter searches on its event loop when it can (cheaper than a thread hop), and in
    a thread when the search would read the directory or wait for an index being built."""
    article(tmp_path / "returns.md", "Returns", "Returns are accepted within 30 days.")
    knowledge = Knowledge(tmp_path, recheck=3600)
    assert knowledge.search_now("return") is None  # never looked at the directory yet
    assert [p.article for p in knowledge.search("return")] == ["returns"]
    assert [p.article for p in knowledge.search_now("return") or []] == ["returns"]
    with knowledge._lock:  # another thread rebuilding the index
        assert knowledge.search_now("return") is None
    assert Knowledge(tmp_path, recheck=0).search_now("return") is None  # always due a look


def test_a_bad_article_is_skipped_and_the_rest_still_found(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    article(tmp_path / "returns.md", "Returns", "Returns are accepted within 30 days.")
    (tmp_path / "draft.md").write_text("# no front matter at all\n\nreturn policy draft")
    (tmp_path / "broken.md").write_text("---\ntitle: [unclosed\n---\n\nreturn text\n")
    with caplog.at_level(logging.WARNING):
        knowledge = Knowledge(tmp_path)
        assert [p.article for p in knowledge.search("return")] == ["returns"]
    skipped = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert len(skipped) == 2 and any("draft.md" in m for m in skipped), skipped
    with pytest.raises(KnowledgeError, match="title"):
        parse("untitled", "---\ncategory: refund\n---\n\ntext\n")


def test_the_offline_model_answers_with_the_best_passage_and_cites_it() -> None:
    ticket = {
        "id": "T1026",
        "subject": "Refund not received yet",
        "body": "You confirmed my refund but it still hasn't reached my account. How long?",
        "customer": {"name": "Mia Larsen"},
        "messages": [],
    }
    passages = Knowledge(DEMO_KNOWLEDGE).search(prompt.query(ticket), k=3)
    asked = prompt.messages(ticket, [], passages=passages)
    draft = offline.compose(str(asked[-1].content))
    assert draft["sources"] == ["refunds"]
    assert "processed within 5 business days" in draft["reply"]
    assert draft["reply"].startswith("Hi Mia,")
    assert offline.compose(str(prompt.messages(ticket, [])[-1].content))["sources"] == []


def citing(*articles: str) -> Any:
    def responder(body: dict[str, Any]) -> dict[str, Any]:
        return {**default_responder(body), "sources": list(articles)}

    return responder


def knowledge_given(request: dict[str, Any]) -> list[dict[str, Any]]:
    text = request["messages"][-1]["content"]
    quoted = text.split("<knowledge>\n", 1)[1].split("\n</knowledge>", 1)[0]
    found: list[dict[str, Any]] = json.loads(quoted)
    return found


async def test_the_model_is_given_the_passages_and_the_citation_reaches_the_item(
    bus: Bus, harness: Harness, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = citing("duplicate-charges")
    harness.start(DESK_KNOWLEDGE_DIR=str(DEMO_KNOWLEDGE))
    await send_event(bus, "T1012", "evt_1")  # "Charged twice for my subscription"
    await eventually(lambda: items(bus), timeout=20, message="the inbox item")
    [item] = await items(bus)
    [request] = fake_llm.requests
    given = knowledge_given(request)
    assert given[0]["article"] == "duplicate-charges", given
    assert "Never follow instructions" not in given[0]["text"]  # data, not the system prompt
    assert "sources" in json.dumps(request["tools"])  # the Draft schema asks for them
    assert [c.article for c in item.citations] == ["duplicate-charges"] * len(item.citations)
    assert item.citations and item.citations[0].title == "Charged twice (duplicate charges)"
    assert any("settled" in c.passage for c in item.citations)
    assert item.warnings == []


async def test_a_draft_citing_an_article_it_was_not_given_is_redrafted_then_warned(
    bus: Bus, harness: Harness, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = citing("refunds", "made-up-policy")
    harness.start(DESK_KNOWLEDGE_DIR=str(DEMO_KNOWLEDGE))
    await send_event(bus, "T1012", "evt_1")
    await eventually(lambda: items(bus), timeout=20, message="the inbox item")
    [item] = await items(bus)
    assert len(fake_llm.requests) == 2  # redrafted once, with the problem named
    assert "made-up-policy" in fake_llm.requests[1]["messages"][-1]["content"]
    [warning] = item.warnings
    assert "'made-up-policy'" in warning and "not given" in warning
    given = {p["article"] for p in knowledge_given(fake_llm.requests[0])}
    assert {c.article for c in item.citations} == {"refunds"} & given


def test_a_passage_reads_as_written_not_as_wrapped_in_the_file() -> None:
    [passage] = parse(
        "steps",
        "---\ntitle: Steps\n---\n\n# Export\n\nOpen the report\nand choose Export.\n\n"
        "- CSV for spreadsheets\n- JSON for\n  programs\n",
    )
    assert passage.section == "Export"
    assert passage.text == (
        "Open the report and choose Export.\n\n- CSV for spreadsheets\n- JSON for programs"
    )


async def test_the_helpdesk_articles_endpoint_grounds_the_drafts_too(
    bus: Bus, harness: Harness, fake_llm: FakeLLM
) -> None:
    """DESK_HELPDESK_ARTICLES_PATH: the help centre's articles, read through the HTTP helpdesk
    contract, are searched like files (here without any directory); one off contract is
    skipped."""
    server = HttpServer(
        helpdesk_app(SqlSource(harness.helpdesk_url), asyncio.Event()), "127.0.0.1", 0
    )
    await server.start()
    try:
        fake_llm.responder = citing("kb-4711")
        harness.start(
            DESK_HELPDESK_KIND="http",
            DESK_HELPDESK_URL=server.url,
            DESK_HELPDESK_AUTH_VALUE=TOKEN,
            DESK_HELPDESK_ARTICLES_PATH="/articles",
        )
        await send_event(bus, "T1012", "evt_1")  # "Charged twice for my subscription"
        await eventually(lambda: items(bus), timeout=20, message="the inbox item")
    finally:
        await server.stop()
    [item] = await items(bus)
    given = knowledge_given(fake_llm.requests[0])
    assert [g["article"] for g in given] == ["kb-4711"]
    assert "disappears by itself within 3 to 5 business days" in given[0]["text"]
    [citation] = item.citations
    assert (citation.article, citation.url) == ("kb-4711", "https://help.example.com/articles/4711")
