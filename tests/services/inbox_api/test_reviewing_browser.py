"""Reviewing in headless Chromium: every page a reviewer opens fits a phone screen (no sideways
scrolling, asserted on the document) and the list still shows each item's priority, status,
customer and summary; a draft whose checks found problems shows them first and is sent only once
the reviewer confirms them; the keyboard works through the inbox; selected items are ignored at
once after one confirmation."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from desk.natsserver import NatsServer
from shared.bus import Bus
from tests.helpers import eventually
from tests.inbox_items import conversation, draft_item, publish_item

from .conftest import REVIEWER, Api, running_api
from .test_claims import detail, new_item
from .test_web import CHROMIUM, chromium, log_in

PHONE = {"width": 375, "height": 740}  # an iPhone SE's CSS pixels
DESKTOP = {"width": 1100, "height": 900}

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="headless browser test needs Debian's chromium package"
)


@pytest.fixture(scope="module")
def inbox(inbox_nats: NatsServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    with running_api("sqlite", inbox_nats, tmp_path_factory.mktemp("phone")) as running:
        yield running


async def oldest_items(inbox: Api, bus: Bus, days: int, count: int = 3) -> list[str]:
    """`count` waiting items made `days` ago (older than any other: first in line), in order."""
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(days=days)
    items = [
        draft_item(f"T{uuid.uuid4().hex[:8]}", created_at=long_ago + dt.timedelta(minutes=n))
        for n in range(count)
    ]
    for item in items:
        await publish_item(bus, item)
    for item in items:

        async def projected(i: str = item.id) -> bool:
            return (await detail(inbox, i, REVIEWER)).get("status") == "waiting"

        await eventually(projected, timeout=15, message=f"{item.id} in the inbox")
    return [i.id for i in items]


async def logged_in(browser: Any, url: str, viewport: dict[str, int]) -> Any:
    """A new page of `browser`, logged in to the inbox at `url` as the reviewer, on its list."""
    page = await browser.new_page(viewport=viewport, is_mobile=viewport is PHONE)
    await page.goto(url + "/login")
    await page.fill("#token", REVIEWER)
    await page.click("form.login button")
    await page.wait_for_url("**/inbox")
    return page


async def test_every_page_fits_a_phone_screen(inbox: Api, nats_bus: Bus) -> None:
    long_word = "https://helpdesk.example.com/attachments/" + "x" * 120  # no place to break
    thread = f"T{uuid.uuid4().hex[:8]}"
    said = conversation(thread, ("customer", f"My refund never arrived, see {long_word}."))
    item = draft_item(
        thread,
        reply=f"Hi Maximilian,\n\nThe receipt is at {long_word}.\n\nBest regards",
        round_id=said[0].id,
        conversation=said,
        priority="urgent",
    )
    assert item.customer is not None
    customer = item.customer.model_copy(
        update={"name": "Maximilian Alexander Featherstonehaugh-Montgomery"}
    )
    item = item.model_copy(
        update={"customer": customer, "warnings": ["the reply contains a link: " + long_word]}
    )
    await publish_item(nats_bus, item)
    await new_item(inbox, nats_bus, token=REVIEWER)  # a second, plain item

    async def projected() -> bool:
        return (await detail(inbox, item.id, REVIEWER)).get("status") == "waiting"

    await eventually(projected, timeout=15, message=f"{item.id} in the inbox")

    async with chromium() as browser:
        page = await logged_in(browser, inbox.url, PHONE)
        row = page.locator(f"#items tr[data-item='{item.id}']")
        assert await row.is_visible()
        card = (await row.inner_text()).lower()
        for shown in ("urgent", "waiting", "maximilian", (item.summary or item.id).lower()):
            assert shown in card, (shown, card)
        for path in (
            "/inbox",
            "/inbox?status=all",
            f"/items/{item.id}",
            f"/items/{item.id}?edit=1",
            "/stats",
            "/instructions",
            "/autosend",
        ):
            await page.goto(inbox.url + path)
            width = await page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
            assert width[0] <= width[1], f"{path} is {width[0]}px wide on a {width[1]}px screen"


async def test_a_draft_with_warnings_is_sent_only_once_they_are_confirmed(
    inbox: Api, nats_bus: Bus
) -> None:
    plain = await new_item(inbox, nats_bus, token=REVIEWER)
    thread = f"T{uuid.uuid4().hex[:8]}"
    warned = draft_item(thread).model_copy(
        update={"warnings": ["the reply promises a refund amount the ticket does not state"]}
    )
    await publish_item(nats_bus, warned)

    async def projected() -> bool:
        return (await detail(inbox, warned.id, REVIEWER)).get("status") == "waiting"

    await eventually(projected, timeout=15, message=f"{warned.id} in the inbox")
    async with chromium() as browser:
        page = await logged_in(browser, inbox.url, DESKTOP)

        await page.goto(f"{inbox.url}/items/{plain}")
        assert await page.locator("#warnings").count() == 0
        assert await page.locator("#accept input[name=confirm]").count() == 0

        await page.goto(f"{inbox.url}/items/{warned.id}")
        box = page.locator("#warnings")
        assert "promises a refund amount" in await box.inner_text()
        above = await box.bounding_box()
        draft = await page.locator("#draft").bounding_box()
        assert above is not None and draft is not None and above["y"] < draft["y"]

        await page.click("#accept button")  # not confirmed: the browser keeps the form
        assert page.url.endswith(f"/items/{warned.id}")
        assert (await detail(inbox, warned.id, REVIEWER))["status"] == "waiting"

        # a form that skips the tick (the page's `required` removed) is refused by the inbox
        await page.evaluate("document.querySelector('#accept input[name=confirm]').remove()")
        await page.click("#accept button")
        await page.wait_for_load_state()
        assert "Confirm the warnings" in await page.locator("main").inner_text()
        assert (await detail(inbox, warned.id, REVIEWER))["status"] == "waiting"

        await page.goto(f"{inbox.url}/items/{warned.id}")
        await page.check("#accept input[name=confirm]")
        await page.click("#accept button")
        await page.wait_for_url(lambda url: "after=decision" in url or url.endswith("/inbox"))
        assert f"Accepted: {warned.id}" in await page.locator(".flash").inner_text()
        assert (await detail(inbox, warned.id, REVIEWER))["status"] == "sending"


async def test_the_keyboard_works_through_three_items(inbox: Api, nats_bus: Bus) -> None:
    """j/k and Enter on the list, then a, i and r on three items in a row: after each decision
    the next waiting item opens, saying what was done to the last one."""
    first, second, third = await oldest_items(inbox, nats_bus, days=900)
    async with chromium() as browser:
        page = await logged_in(browser, inbox.url, DESKTOP)

        await page.keyboard.press("?")
        assert await page.locator("dialog#keys").is_visible()
        await page.keyboard.press("Escape")
        assert not await page.locator("dialog#keys").is_visible()

        selected = page.locator("#items tr.selected")
        for key, wanted in (("j", first), ("j", second), ("k", first)):
            await page.keyboard.press(key)
            assert await selected.get_attribute("data-item") == wanted
        await page.keyboard.press("Enter")
        await page.wait_for_url(f"**/items/{first}")

        await page.keyboard.press("a")
        await page.wait_for_url(f"**/items/{second}?after=decision")
        assert f"Accepted: {first}" in await page.locator(".flash").inner_text()
        await page.keyboard.press("i")
        await page.wait_for_url(f"**/items/{third}?after=decision")
        assert f"Ignored: {second}" in await page.locator(".flash").inner_text()
        await page.keyboard.press("r")
        assert await page.evaluate("document.activeElement.id") == "feedback"
        await page.keyboard.type("Shorter, please.")
        await page.click("#respond button")
        await page.wait_for_url(lambda url: "after=decision" in url or url.endswith("/inbox"))
        assert (
            f"Feedback sent; a new draft will follow: {third}"
            in await page.locator(".flash").inner_text()
        )
    statuses = [(await detail(inbox, i, REVIEWER))["status"] for i in (first, second, third)]
    assert statuses == ["sending", "ignored", "redrafting"]


async def test_selected_items_are_ignored_at_once_after_one_confirmation(
    inbox: Api, nats_bus: Bus
) -> None:
    *chosen, kept = await oldest_items(inbox, nats_bus, days=950)
    async with chromium() as browser:
        page = await logged_in(browser, inbox.url, DESKTOP)
        asked: list[str] = []

        async def answer(dialog: Any) -> None:
            asked.append(dialog.message)
            await (dialog.dismiss() if len(asked) == 1 else dialog.accept())

        page.on("dialog", answer)
        assert await page.locator("#ignore-selected").is_disabled()
        for item_id in chosen:
            await page.check(f"#items input[value='{item_id}:1']")
        assert (await page.locator("#selected-count").inner_text()) == "2 selected"
        await page.click("#ignore-selected")  # asked, and dismissed: nothing happens
        assert asked == ["Ignore 2 items? Nothing will be sent to their customers."]
        assert (await detail(inbox, chosen[0], REVIEWER))["status"] == "waiting"
        await page.click("#ignore-selected")  # asked again, and confirmed
        await page.wait_for_url("**/inbox")
        await page.locator(".flash").wait_for()
        assert (await page.locator(".flash").inner_text()) == "Ignored 2 items"
        assert len(asked) == 2
    statuses = [(await detail(inbox, i, REVIEWER))["status"] for i in (*chosen, kept)]
    assert statuses == ["ignored", "ignored", "waiting"]


async def test_an_unconfirmed_selection_asks_once_and_a_changed_item_is_skipped(
    inbox: Api, nats_bus: Bus
) -> None:
    """Without the page's script (or from a forged post) the inbox asks on a page of its own;
    an item decided meanwhile is left alone and named."""
    first = await new_item(inbox, nats_bus, token=REVIEWER)
    second = await new_item(inbox, nats_bus, token=REVIEWER)
    async with httpx.AsyncClient(base_url=inbox.url, timeout=10) as client:
        csrf = await log_in(client, REVIEWER)
        form = {"csrf": csrf, "item": [f"{first}:1", f"{second}:1"]}
        asking = await client.post("/inbox/ignore", data=form)
        assert asking.status_code == 200 and "Ignore 2 items?" in asking.text
        assert (await detail(inbox, first, REVIEWER))["status"] == "waiting"
        async with inbox.client(REVIEWER) as api:
            taken = await api.post(f"/api/items/{second}/decision", json={"type": "accept"})
            assert taken.status_code == 202
        done = await client.post("/inbox/ignore", data={**form, "confirmed": "1"})
        assert (done.status_code, done.headers["location"]) == (303, "/inbox")
        shown = (await client.get("/inbox")).text
        assert f"Ignored 1 item; skipped 1: {second} (this item is sending" in shown
        bad = await client.post("/inbox/ignore", data={"csrf": csrf, "item": "nope"})
        assert bad.status_code == 422
        none = await client.post("/inbox/ignore", data={"csrf": csrf})
        assert none.status_code == 422
    assert (await detail(inbox, first, REVIEWER))["status"] == "ignored"
