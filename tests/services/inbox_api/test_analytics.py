"""The review analytics: the figures computed from the trail (pure), `/api/stats`'s `review`
against a real inbox_api process on SQLite and PostgreSQL, and the `/stats` page."""

from __future__ import annotations

import datetime as dt
import re
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlmodel import Session

from services.inbox_api import store
from services.inbox_api.store.analytics import Reviewed, figures, percentile
from shared.bus import Bus
from shared.db import make_engine
from shared.inbox import InboxItem
from shared.results import REPLY_FAILED, REPLY_SENT, REPLY_WITHDRAWN
from shared.similarity import edit_distance
from tests.helpers import eventually
from tests.inbox_items import draft_item, notify_item, publish_item

from .conftest import VIEWER, Api

HOUR = 3600.0

# -- the figures, computed without a database -------------------------------------------------


def test_percentiles_interpolate_between_ranks() -> None:
    assert percentile([], 50) is None
    assert percentile([7.0], 90) == 7.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([10.0, 20.0, 30.0], 90) == pytest.approx(28.0)


def test_edit_distance_is_one_minus_the_character_similarity() -> None:
    assert edit_distance("Same text", "Same text") == (0.0, 0)
    # 11 characters kept of 11 + 12: ratio 22/23; one character added
    assert edit_distance("Hello there", "Hello there!") == (round(1 / 23, 6), 1)
    # "Thanks" kept of 6 + 12: ratio 12/18; " a lot" added
    assert edit_distance("Thanks", "Thanks a lot") == (round(1 / 3, 6), 6)
    assert edit_distance(None, "sent") is None


def test_figures_leave_escalations_out_of_the_unedited_share_and_fill_every_day() -> None:
    until = dt.datetime(2026, 12, 3, 12, tzinfo=dt.UTC)
    since = until - dt.timedelta(days=2)

    def at(day: int, kind: str, category: str, **more: Any) -> Reviewed:
        decided = dt.datetime(2026, 12, day, 10, tzinfo=dt.UTC)
        defaults: dict[str, Any] = {"seconds": 60.0, "on_draft": True}
        return Reviewed(kind, category, decided, **{**defaults, **more})

    rows = [
        at(1, "accept", "refund", seconds=100.0),
        at(1, "edit", "refund", seconds=300.0, edit=(0.5, 10)),
        at(3, "ignore", "escalation", seconds=20.0, on_draft=False),
    ]
    review = figures(rows, 2, since, until)
    assert [d["date"] for d in review["by_day"]] == ["2026-12-01", "2026-12-02", "2026-12-03"]
    assert [d["decisions"] for d in review["by_day"]] == [2, 0, 1]
    assert review["by_day"][1]["unedited_share"] is None  # nothing to measure: None, not 0
    refund, escalation = review["by_category"]["refund"], review["by_category"]["escalation"]
    assert refund["unedited_share"] == 0.5
    assert (refund["edit_ratio"], refund["changed_chars"], refund["edits_measured"]) == (0.5, 10, 1)
    assert refund["time_to_decision_seconds"] == {"median": 200.0, "p90": 280.0}
    assert escalation["unedited_share"] is None and escalation["edit_ratio"] is None
    overall = review["overall"]
    assert (overall["decisions"], overall["accept"], overall["ignore"]) == (3, 1, 1)
    assert overall["unedited_share"] == 0.5  # the escalation's ignore is no reply draft
    assert overall["rates"] == {"accept": 0.3333, "edit": 0.3333, "response": 0.0, "ignore": 0.3333}
    assert overall["time_to_decision_seconds"]["median"] == 100.0


def test_an_approved_reply_that_never_went_out_counts_as_no_reply_sent(tmp_path: Path) -> None:
    """The review figures and the auto-send evidence count the replies that reached the
    customer (or are on their way): an accept whose reply the sender withdrew (the ticket changed
    first) or failed to deliver is no reply "sent unedited"."""
    engine = make_engine(f"sqlite:///{tmp_path / 'inbox.sqlite'}")
    store.create_tables(engine)
    items = {
        name: draft_item(f"T{name}{uuid.uuid4().hex[:6]}", category="refund")
        for name in ("sent", "sending", "withdrawn", "failed", "edited")
    }
    reviewer = store.Reviewer("reviewer", "reviewer")
    for name, item in items.items():
        store.project(engine, item)
        edit = name == "edited"
        store.decide(engine, item.id, "edit" if edit else "accept", "Hi!" if edit else None, 1,
                     reviewer)  # fmt: skip
    for name, result in (("sent", REPLY_SENT), ("withdrawn", REPLY_WITHDRAWN),
                         ("failed", REPLY_FAILED), ("edited", REPLY_SENT)):  # fmt: skip
        status = result.removeprefix("reply.")
        assert store.set_result(engine, items[name].id, status, {"type": result})
    figures = store.review(engine, days=1)["by_category"]["refund"]
    assert (figures["accept"], figures["edit"]) == (4, 1)  # what reviewers decided
    assert figures["unedited_share"] == round(2 / 3, 4)  # of sent, still sending, the edit sent
    assert figures["replies_sent"] == 3
    with Session(engine) as session:
        shown = store.autosend.evidence(session, "refund", store.autosend.Policy(evidence=10))
    assert (shown["decisions"], shown["unedited_accepts"]) == (3, 2)
    engine.dispose()


# -- /api/stats on a real inbox ---------------------------------------------------------------


async def waiting(api: Api, bus: Bus, *items: InboxItem) -> None:
    for item in items:
        await publish_item(bus, item)
    async with api.client() as client:
        for item in items:

            async def stored(i: InboxItem = item) -> bool:
                return (await client.get(f"/api/items/{i.id}")).status_code == 200

            await eventually(stored, timeout=15, message=f"{item.id} projected")


async def decide(client: httpx.AsyncClient, item: InboxItem, kind: str, args: Any = None) -> None:
    answer = await client.post(
        f"/api/items/{item.id}/decision", json={"type": kind, "version": 1, "args": args}
    )
    assert answer.status_code == 202, answer.text


def ago(seconds: float) -> dt.datetime:
    return dt.datetime.now(dt.UTC) - dt.timedelta(seconds=seconds)


async def test_stats_review_counts_rates_edit_distance_and_time_to_decision(
    api: Api, nats_bus: Bus
) -> None:
    marker = uuid.uuid4().hex[:6]
    refund, bug = f"refund{marker}", f"bug{marker}"
    r1, r2, r3 = (
        draft_item(f"R{marker}{n}", category=refund, reply="Hello there", created_at=ago(n * HOUR))
        for n in (1, 2, 3)
    )
    b1, b2, b3 = (
        draft_item(f"B{marker}{n}", category=bug, reply="Thanks", created_at=ago(600))
        for n in (1, 2, 3)
    )
    escalation = notify_item(f"E{marker}")
    await waiting(api, nats_bus, r1, r2, r3, b1, b2, b3, escalation)
    async with api.client() as client:
        before = (await client.get("/api/stats", params={"days": 1})).json()["review"]["overall"]
        await decide(client, r1, "edit", "Hello there!")
        await decide(client, r2, "accept")
        await decide(client, r3, "accept")
        await decide(client, b1, "edit", "Thanks a lot")
        await decide(client, b2, "response", "Mention the tracking number")
        await decide(client, b3, "ignore")
        await decide(client, escalation, "ignore")
        stats = (await client.get("/api/stats", params={"days": 1})).json()

    assert {"by_status", "by_category", "oldest_waiting", "decision_mix"} <= stats.keys()
    review = stats["review"]
    assert review["days"] == 1
    since, until = (dt.datetime.fromisoformat(review[k]) for k in ("since", "until"))
    assert until - since == dt.timedelta(days=1)

    r = review["by_category"][refund]
    assert {k: r[k] for k in ("decisions", "accept", "edit", "response", "ignore")} == {
        "decisions": 3,
        "accept": 2,
        "edit": 1,
        "response": 0,
        "ignore": 0,
    }
    assert r["rates"] == {"accept": 0.6667, "edit": 0.3333, "response": 0.0, "ignore": 0.0}
    assert r["unedited_share"] == 0.6667
    assert r["edit_ratio"] == round(1 / 23, 4) and r["edit_ratio"] > 0
    assert (r["changed_chars"], r["edits_measured"]) == (1.0, 1)
    waited = r["time_to_decision_seconds"]  # waits of about 1, 2 and 3 hours
    assert 2 * HOUR <= waited["median"] < 2 * HOUR + 120
    assert 2.8 * HOUR <= waited["p90"] < 2.8 * HOUR + 120

    b = review["by_category"][bug]
    assert [b[k] for k in ("decisions", "accept", "edit", "response", "ignore")] == [3, 0, 1, 1, 1]
    assert b["unedited_share"] == 0.0  # its one sent reply was edited
    assert (b["edit_ratio"], b["changed_chars"]) == (0.3333, 6.0)
    assert 600 <= b["time_to_decision_seconds"]["median"] < 720

    e = review["by_category"]["escalation"]
    assert e["ignore"] >= 1 and e["accept"] == e["edit"] == 0
    assert (e["unedited_share"], e["edit_ratio"], e["edits_measured"]) == (None, None, 0)

    overall = review["overall"]
    added = {k: overall[k] - before[k] for k in ("decisions", "accept", "edit", "response")}
    assert added == {"decisions": 7, "accept": 2, "edit": 2, "response": 1}
    assert overall["ignore"] - before["ignore"] == 2
    assert overall["decisions"] == sum(c["decisions"] for c in review["by_category"].values())
    assert [d["date"] for d in review["by_day"]] == [
        since.date().isoformat(),
        until.date().isoformat(),
    ]
    assert sum(d["decisions"] for d in review["by_day"]) == overall["decisions"]


async def test_the_stats_window_is_checked(api: Api) -> None:
    async with api.client(token=VIEWER) as viewer:
        default = (await viewer.get("/api/stats")).json()["review"]
        assert default["days"] == 30 and len(default["by_day"]) == 31
        widest = await viewer.get("/api/stats", params={"days": 365})
        assert widest.status_code == 200 and len(widest.json()["review"]["by_day"]) == 366
        for bad in ("0", "366", "-3", "week", "1.5"):
            answer = await viewer.get("/api/stats", params={"days": bad})
            assert answer.status_code == 422, bad
            assert "days must be" in answer.json()["error"], bad


# -- the /stats page ---------------------------------------------------------------------------


async def test_the_stats_page_shows_each_category_and_its_charts_to_a_viewer(
    api: Api, nats_bus: Bus
) -> None:
    marker = uuid.uuid4().hex[:6]
    invoice, shipping = f"invoice{marker}", f"shipping{marker}"
    sent, edited, dropped = (
        draft_item(f"S{marker}{n}", category=c) for n, c in enumerate((invoice, invoice, shipping))
    )
    await waiting(api, nats_bus, sent, edited, dropped)
    async with api.client() as client:
        await decide(client, sent, "accept")
        await decide(client, edited, "edit", "Hi Jane, your invoice is attached.")
        await decide(client, dropped, "ignore")

    async with httpx.AsyncClient(base_url=api.url, timeout=10) as browser:
        assert (await browser.get("/stats")).headers["location"] == "/login"
        assert (await browser.post("/login", data={"token": VIEWER})).status_code == 303
        assert 'href="/stats"' in (await browser.get("/inbox")).text  # in the nav
        page = await browser.get("/stats", params={"days": 7})
        assert (await browser.get("/stats", params={"days": "0"})).status_code == 422
    assert page.status_code == 200, page.text
    html = page.text
    rows = {
        name: re.search(rf'<tr id="category-{name}">(.*?)</tr>', html, re.S)
        for name in (invoice, shipping)
    }
    invoices, shippings = rows[invoice], rows[shipping]
    assert invoices and ">50 %<" in invoices.group(1)  # one of two sent unedited
    assert shippings and "—" in shippings.group(1)  # nothing sent: no share
    assert ">no reply sent</text>" in html
    assert html.count("<svg") == 2
    assert re.search(r'<svg class="chart" id="days-chart"[^>]*role="img"', html)
    assert '<rect class="k-accept"' in html and '<rect class="k-share"' in html
    assert f"<title>{invoice}: 50 % of 2 sent unedited</title>" in html
    # drawn by the server under the page's CSP: no script, no style attribute, nothing fetched
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'nonce-" in csp
    # the page's one script is the keyboard help every page has; the charts need none
    script_nonce = re.search(r"script-src 'nonce-([^']+)'", csp)
    assert script_nonce and html.count("<script") == 1
    assert f'<script nonce="{script_nonce.group(1)}">' in html and 'id="keys"' in html
    assert "style=" not in html
    assert not re.search(r'(src|href)="https?:', html)
    nonce = re.search(r"style-src 'nonce-([^']+)'", csp)
    assert nonce and html.count(f'<style nonce="{nonce.group(1)}">') == 2
