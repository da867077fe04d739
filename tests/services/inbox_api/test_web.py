"""The reviewer's web page against a real inbox_api process and a real nats-server: sessions,
CSRF, roles, the edit preview, deciding, and one run in a headless Chromium."""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from desk.natsserver import NatsServer
from services.inbox_api.web import age, diff
from shared import subjects
from shared.bus import Bus
from shared.envelope import Envelope
from shared.inbox import InboxItem
from tests.helpers import eventually, messages
from tests.inbox_items import draft_item, notify_item, publish_item
from tests.services_running import ServiceProcess

from .conftest import REVIEWER, VIEWER, write_credentials

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
NOW = dt.datetime.now(dt.UTC)


@pytest.fixture(scope="module")
def web(inbox_nats: NatsServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("inbox-web")
    write_credentials(root / "var")
    env = {"DESK_NATS_URL": inbox_nats.url, "DESK_VAR_DIR": str(root / "var")}
    process = ServiceProcess(["inbox_api"], env, root / "inbox_api.log").start()
    try:
        yield process.url
    finally:
        process.stop()


@pytest.fixture
async def browser_client(web: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=web, timeout=10) as client:
        yield client


def new_thread() -> str:
    return f"T{uuid.uuid4().hex[:8]}"


async def waiting(web: str, bus: Bus, *items: InboxItem) -> None:
    """Publish items as the drafter does and wait until the inbox lists them."""
    for item in items:
        await publish_item(bus, item)
    async with httpx.AsyncClient(
        base_url=web, headers={"Authorization": f"Bearer {REVIEWER}"}
    ) as c:
        for item in items:

            async def listed(i: InboxItem = item) -> bool:
                return (await c.get(f"/api/items/{i.id}")).status_code == 200

            await eventually(listed, timeout=15, message=f"{item.id} in the inbox")


async def log_in(client: httpx.AsyncClient, token: str) -> str:
    """Log the client in; the CSRF token of its session."""
    answer = await client.post("/login", data={"token": token})
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == "/inbox"
    page = await client.get("/inbox")
    assert page.status_code == 200
    return csrf_of(page.text)


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "no CSRF token on the page"
    return found.group(1)


async def decisions(bus: Bus, thread: str) -> list[dict[str, Any]]:
    found = []
    for m in await messages(bus.js, subjects.INBOX):
        if m.subject == subjects.INBOX_DECISION and m.data:
            data = Envelope.model_validate_json(m.data).data
            if data["thread"] == thread:
                found.append(data)
    return found


async def published(bus: Bus, thread: str) -> bool:
    return bool(await decisions(bus, thread))


# -- pure helpers ------------------------------------------------------------------------------


def test_age_reads_like_a_person_says_it() -> None:
    assert age(NOW - dt.timedelta(seconds=20), NOW) == "< 1 min"
    assert age(NOW - dt.timedelta(minutes=3, seconds=30), NOW) == "3 min"
    assert age(NOW - dt.timedelta(hours=2, minutes=59), NOW) == "2 h"
    assert age(NOW - dt.timedelta(days=3, hours=1), NOW) == "3 d"
    assert age(NOW + dt.timedelta(seconds=5), NOW) == "< 1 min"  # clock skew is not negative


def test_diff_marks_insertions_and_deletions_word_by_word() -> None:
    before = "Hi Jane,\n\nWe are on it.\n\nBest regards"
    after = "Hi Jane,\n\nWe fixed it today.\n\nBest regards"
    segments = diff(before, after)
    assert "".join(t for op, t in segments if op != "insert") == before
    assert "".join(t for op, t in segments if op != "delete") == after
    assert ("delete", "are on") in segments
    assert ("insert", "fixed") in segments
    assert ("insert", " today") in segments
    assert diff("same", "same") == [("equal", "same")]
    assert diff("", "new text") == [("insert", "new text")]


# -- sessions, CSRF and roles ------------------------------------------------------------------


async def test_pages_need_a_login_and_a_wrong_token_gets_401(
    browser_client: httpx.AsyncClient,
) -> None:
    c = browser_client
    for path in ("/", "/inbox", "/items/T1~v1"):
        answer = await c.get(path)
        assert (answer.status_code, answer.headers["location"]) == (303, "/login"), path
    assert (await c.get("/inbox/version")).status_code == 401
    refused = await c.post("/items/T1~v1/decide", data={"type": "accept", "version": "1"})
    assert refused.status_code == 401

    wrong = await c.post("/login", data={"token": "not-a-token"})
    assert wrong.status_code == 401
    assert "That token is not valid." in wrong.text
    assert "session" not in wrong.headers.get("set-cookie", "")
    assert (await c.post("/login", data={})).status_code == 401

    answer = await c.post("/login", data={"token": REVIEWER})
    cookie = answer.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie
    assert (await c.get("/")).headers["location"] == "/inbox"
    page = await c.get("/inbox")
    assert page.status_code == 200
    assert "reviewer" in page.text
    assert "nonce-" in page.headers["content-security-policy"]
    assert (await c.get("/inbox/version")).json()["version"]

    out = await c.post("/logout", data={"csrf": csrf_of(page.text)})
    assert (out.status_code, out.headers["location"]) == (303, "/login")
    assert (await c.get("/inbox")).headers["location"] == "/login"


async def test_a_post_without_the_session_csrf_token_is_403(
    web: str, browser_client: httpx.AsyncClient, nats_bus: Bus
) -> None:
    item = draft_item(new_thread())
    await waiting(web, nats_bus, item)
    csrf = await log_in(browser_client, REVIEWER)
    for form in (
        {"type": "accept", "version": "1"},
        {"type": "accept", "version": "1", "csrf": "forged"},
        {"type": "accept", "version": "1", "csrf": csrf + "x"},
        {"type": "accept", "version": "1", "csrf": "ünïcode"},
    ):
        answer = await browser_client.post(f"/items/{item.id}/decide", data=form)
        assert answer.status_code == 403, form
    preview = await browser_client.post(f"/items/{item.id}/edit", data={"reply": "x"})
    assert preview.status_code == 403
    assert (await browser_client.post("/logout")).status_code == 403
    assert await decisions(nats_bus, item.thread) == []

    page = await browser_client.get(f"/items/{item.id}")
    assert "waiting" in page.text  # nothing was decided


async def test_a_viewer_sees_no_forms_and_may_not_post(
    web: str, browser_client: httpx.AsyncClient, nats_bus: Bus
) -> None:
    item = draft_item(new_thread())
    await waiting(web, nats_bus, item)
    csrf = await log_in(browser_client, VIEWER)
    page = await browser_client.get(f"/items/{item.id}")
    assert page.status_code == 200
    assert item.action_request.args["reply"].split("\n")[0] in page.text
    assert "/decide" not in page.text and "/edit" not in page.text
    assert "<textarea" not in page.text
    assert "read this inbox but not decide" in page.text
    for path, form in (
        ("decide", {"type": "accept", "version": "1", "csrf": csrf}),
        ("edit", {"reply": "Hello", "version": "1", "csrf": csrf}),
    ):
        answer = await browser_client.post(f"/items/{item.id}/{path}", data=form)
        assert answer.status_code == 403
    assert await decisions(nats_bus, item.thread) == []


async def test_the_detail_shows_only_the_forms_the_item_allows(
    web: str, browser_client: httpx.AsyncClient, nats_bus: Bus
) -> None:
    draft, notify = draft_item(new_thread()), notify_item(new_thread())
    await waiting(web, nats_bus, draft, notify)
    await log_in(browser_client, REVIEWER)
    page = (await browser_client.get(f"/items/{draft.id}")).text
    for form in ('id="accept"', 'id="edit"', 'id="respond"', 'id="ignore"'):
        assert form in page
    assert page.count('name="version" value="1"') == 4
    page = (await browser_client.get(f"/items/{notify.id}")).text
    assert 'id="ignore"' in page
    assert 'id="accept"' not in page and 'id="edit"' not in page and 'id="respond"' not in page
    assert "lawyer" in page


# -- the edit flow and deciding ----------------------------------------------------------------


async def test_an_edit_preview_shows_the_diff_escaped(
    web: str, browser_client: httpx.AsyncClient, nats_bus: Bus
) -> None:
    item = draft_item(new_thread(), reply="Hi Jane,\n\nWe are on it.\n\nBest regards")
    await waiting(web, nats_bus, item)
    csrf = await log_in(browser_client, REVIEWER)
    edited = "Hi Jane,\r\n\r\nWe fixed it <b>today</b>.\r\n\r\nBest regards"
    answer = await browser_client.post(
        f"/items/{item.id}/edit", data={"reply": edited, "version": "1", "csrf": csrf}
    )
    assert answer.status_code == 200, answer.text
    assert "<del>are on</del>" in answer.text
    assert "<ins>fixed</ins>" in answer.text
    assert "&lt;b&gt;" in answer.text and "<b>today" not in answer.text
    assert 'action="/items/' in answer.text and 'name="type" value="edit"' in answer.text
    assert await decisions(nats_bus, item.thread) == []  # a preview decides nothing


async def test_deciding_publishes_exactly_one_decision_and_redirects_with_a_message(
    web: str, browser_client: httpx.AsyncClient, nats_bus: Bus
) -> None:
    item = draft_item(new_thread())
    await waiting(web, nats_bus, item)
    csrf = await log_in(browser_client, REVIEWER)
    form = {
        "type": "edit",
        "version": "1",
        "csrf": csrf,
        "reply": "Hi Jane,\r\nYour refund is on its way.",
    }
    answer = await browser_client.post(f"/items/{item.id}/decide", data=form)
    assert (answer.status_code, answer.headers["location"]) == (303, "/inbox")
    page = await browser_client.get("/inbox")
    assert f"Edited reply approved: {item.id}" in page.text
    assert item.id not in page.text.replace(f"approved: {item.id}", "")  # no longer waiting
    assert "approved" not in (await browser_client.get("/inbox")).text  # shown once

    again = await browser_client.post(f"/items/{item.id}/decide", data=form)  # a double click
    assert again.status_code == 409
    assert "not waiting" in again.text

    await eventually(lambda: published(nats_bus, item.thread), message="the decision published")
    [decision] = await decisions(nats_bus, item.thread)
    assert decision["type"] == "edit"
    assert decision["reviewer"] == "reviewer"
    assert decision["args"]["args"]["reply"] == "Hi Jane,\nYour refund is on its way."
    assert decision["version"] == 1


async def test_bad_form_input_gets_a_4xx_page_never_a_500(
    web: str, browser_client: httpx.AsyncClient, nats_bus: Bus
) -> None:
    draft, notify = draft_item(new_thread()), notify_item(new_thread())
    await waiting(web, nats_bus, draft, notify)
    csrf = await log_in(browser_client, REVIEWER)
    c = browser_client
    decide = f"/items/{draft.id}/decide"
    cases: list[tuple[str, dict[str, str], int]] = [
        (decide, {"csrf": csrf}, 422),
        (decide, {"csrf": csrf, "type": "launch", "version": "1"}, 422),
        (decide, {"csrf": csrf, "type": "accept", "version": "one"}, 422),
        (decide, {"csrf": csrf, "type": "accept", "version": "0"}, 422),
        (decide, {"csrf": csrf, "type": "accept", "version": "²"}, 422),
        (decide, {"csrf": csrf, "type": "accept", "version": "9" * 40}, 422),
        (decide, {"csrf": csrf, "type": "accept", "version": "2"}, 409),
        (decide, {"csrf": csrf, "type": "edit", "version": "1", "reply": "  "}, 422),
        (decide, {"csrf": csrf, "type": "edit", "version": "1"}, 422),
        (decide, {"csrf": csrf, "type": "response", "version": "1", "feedback": ""}, 422),
        (decide, {"csrf": csrf, "type": "edit", "version": "1", "reply": "x" * 20_001}, 422),
        (f"/items/{draft.id}/edit", {"csrf": csrf, "version": "1", "reply": ""}, 422),
        (f"/items/{draft.id}/edit", {"csrf": csrf, "reply": "Hello"}, 422),
        (f"/items/{draft.id}/edit", {"csrf": csrf, "version": "7", "reply": "Hello"}, 409),
        (f"/items/{notify.id}/decide", {"csrf": csrf, "type": "accept", "version": "1"}, 422),
        (f"/items/{notify.id}/edit", {"csrf": csrf, "version": "1", "reply": "Hello"}, 422),
        ("/items/T0~v9/decide", {"csrf": csrf, "type": "accept", "version": "1"}, 404),
        ("/items/T0~v9/edit", {"csrf": csrf, "version": "1", "reply": "Hello"}, 404),
    ]
    for path, form, status in cases:
        answer = await c.post(path, data=form)
        assert answer.status_code == status, (path, form, answer.text[-300:])
        assert "text/html" in answer.headers["content-type"]
    assert (await c.post(decide, files={"csrf": ("a.txt", b"x")})).status_code == 400
    too_big = await c.post(decide, content=b"a=" + b"x" * 300_000)
    assert too_big.status_code == 413
    assert (await c.get("/items/T0~v9")).status_code == 404
    assert (await c.get("/inbox?status=lost")).status_code == 422
    assert (await c.get("/inbox?sort=sideways")).status_code == 422
    assert (await c.get("/inbox?cursor=%%%")).status_code == 422
    assert await decisions(nats_bus, draft.thread) == []
    assert "waiting" in (await c.get(f"/items/{draft.id}")).text


async def test_the_list_filters_and_its_version_stamp_follows_changes(
    web: str, browser_client: httpx.AsyncClient, nats_bus: Bus
) -> None:
    word = uuid.uuid4().hex[:10]
    now = dt.datetime.now(dt.UTC)  # ages are shown relative to the time of the request
    old = draft_item(
        new_thread(), category="shipping", created_at=now - dt.timedelta(hours=2, minutes=5)
    )
    new = draft_item(new_thread(), category="refund", created_at=now - dt.timedelta(minutes=3))
    tagged = new.model_copy(update={"description": f"mentions {word}"})
    await waiting(web, nats_bus, old, tagged)
    await log_in(browser_client, REVIEWER)
    c = browser_client

    page = (await c.get("/inbox")).text
    assert page.index(old.id) < page.index(tagged.id)  # oldest waiting first
    assert "2 h" in page and "3 min" in page
    newest = (await c.get("/inbox?sort=newest")).text
    assert newest.index(tagged.id) < newest.index(old.id)
    shipping = (await c.get("/inbox?category=shipping")).text
    assert old.id in shipping and tagged.id not in shipping
    found = (await c.get(f"/inbox?text={word}")).text
    assert tagged.id in found and old.id not in found
    assert old.id not in (await c.get("/inbox?status=decided")).text
    assert old.id in (await c.get("/inbox?status=all")).text

    stamp = (await c.get("/inbox/version")).json()["version"]
    assert f'data-version="{stamp}"' in (await c.get("/inbox")).text
    await waiting(web, nats_bus, draft_item(new_thread()))
    assert (await c.get("/inbox/version")).json()["version"] != stamp


# -- in a real browser ---------------------------------------------------------------------------


async def test_a_reviewer_edits_and_sends_the_oldest_draft_in_a_browser(
    web: str, nats_bus: Bus
) -> None:
    if not CHROMIUM.exists():
        pytest.skip("headless browser test needs Debian's chromium package")
    from playwright.async_api import async_playwright

    oldest = draft_item(
        new_thread(),
        reply="Hi Jane,\n\nWe are looking into your refund.\n\nBest regards,\nThe Support Team",
        created_at=NOW - dt.timedelta(days=400),
    ).model_copy(update={"warnings": ["the customer asked twice"]})
    second = draft_item(new_thread(), created_at=NOW - dt.timedelta(days=399))
    await waiting(web, nats_bus, oldest, second)
    edited = "Hi Jane,\n\nYour refund of $20 was sent today.\n\nBest regards,\nThe Support Team"

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            page = await browser.new_page(viewport={"width": 1100, "height": 1400})
            problems: list[str] = []
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(str(e)))

            await page.goto(web + "/")
            assert page.url.endswith("/login")
            await page.fill("#token", REVIEWER)
            await page.click("form.login button")
            await page.wait_for_url("**/inbox")

            await page.locator("#items tbody tr a").first.click()
            await page.wait_for_url(f"**/items/{oldest.id}")
            assert await page.locator("#draft").inner_text() == oldest.action_request.args["reply"]
            assert await page.locator("text=the customer asked twice").count() == 1
            await page.screenshot(path="/tmp/inbox-detail.png", full_page=True)

            await page.fill("#reply", edited)
            await page.click("text=Preview edit")
            await page.wait_for_url(f"**/items/{oldest.id}/edit")
            assert "was sent today" in " ".join(await page.locator("#diff ins").all_inner_texts())
            assert "are looking into" in " ".join(await page.locator("#diff del").all_inner_texts())

            await page.click("#send button")
            await page.wait_for_url("**/inbox")
            assert await page.locator(".flash").inner_text() == (
                f"Edited reply approved: {oldest.id}"
            )
            rows = page.locator("#items tbody")
            assert await rows.locator(f"a[href='/items/{oldest.id}']").count() == 0
            assert await rows.locator(f"a[href='/items/{second.id}']").count() == 1

            arriving = draft_item(new_thread(), created_at=NOW - dt.timedelta(days=398))
            await publish_item(nats_bus, arriving)  # the page reloads itself when it arrives
            link = rows.locator(f"a[href='/items/{arriving.id}']")
            await link.wait_for(timeout=12_000)
            assert problems == []
        finally:
            await browser.close()

    await eventually(lambda: published(nats_bus, oldest.thread), message="the decision published")
    [decision] = await decisions(nats_bus, oldest.thread)
    assert decision["type"] == "edit"
    assert decision["args"]["args"]["reply"] == edited
    assert decision["reviewer"] == "reviewer"
