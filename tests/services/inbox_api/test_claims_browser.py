"""Two reviewers racing for one item in headless Chromium: opening it claims it, the other sees
who holds it and can only take it over on purpose, the first one's page learns it was taken,
and a claim whose page went away runs out; every step is in the item's claims trail."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from desk.natsserver import NatsServer
from shared.bus import Bus
from tests.helpers import eventually

from .conftest import Api, running_api
from .test_claims import ANA, BEN, detail, new_item, reviewers
from .test_web import CHROMIUM, CHROMIUM_ARGS

CLAIM_SECONDS = 8.0  # the open page renews every 2.7 s; a page gone away loses it in 8 s

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="headless browser test needs Debian's chromium package"
)


@pytest.fixture(scope="module")
def team_web(inbox_nats: NatsServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    with running_api(
        "sqlite",
        inbox_nats,
        tmp_path_factory.mktemp("claims-web"),
        DESK_REVIEWERS=reviewers(),
        DESK_CLAIM_SECONDS=str(CLAIM_SECONDS),
    ) as running:
        yield running


async def test_two_reviewers_race_for_one_item_in_a_browser(team_web: Api, nats_bus: Bus) -> None:
    from playwright.async_api import async_playwright

    api, web = team_web, team_web.url
    first, second = await new_item(api, nats_bus), await new_item(api, nats_bus)
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            pages = {}
            problems: list[str] = []
            for name, token in (("ana", ANA), ("ben", BEN)):
                context = await browser.new_context(viewport={"width": 1100, "height": 1200})
                page = await context.new_page()
                page.on("pageerror", lambda e: problems.append(str(e)))
                await page.goto(web + "/login")
                await page.fill("#token", token)
                await page.click("form.login button")
                await page.wait_for_url("**/inbox")
                pages[name] = page
            ana, ben = pages["ana"], pages["ben"]

            # ana opens it: it is hers, and ben's list says so
            await ana.goto(f"{web}/items/{first}")
            assert "You are working on this" in await ana.locator("#claim").inner_text()
            await ben.goto(web + "/inbox")
            badge = ben.locator(f"tr[data-item='{first}'] .badge.claimed")
            assert (await badge.inner_text()).strip() == "claimed by ana"

            # ben opens it: he sees who has it, and no way to decide but taking it over
            await ben.goto(f"{web}/items/{first}")
            flag = await ben.locator("#claimed-by").inner_text()
            assert flag.strip() == "ana is working on this"  # at the top, beside the status
            notice = await ben.locator("#claim").inner_text()
            assert "ana is working on this" in notice
            assert await ben.locator("#accept").count() == 0
            await ben.click("#take-over button")
            await ben.wait_for_url(f"**/items/{first}")
            assert "You are working on this" in await ben.locator("#claim").inner_text()

            # ana's open page finds out at its next renewal
            await ana.wait_for_selector("#take-over", timeout=10_000)
            assert "ben is working on this" in await ana.locator("#claim").inner_text()

            await ben.click("#accept button")  # the next waiting item opens: the second
            await ben.wait_for_url(f"**/items/{second}?after=decision")
            assert f"Accepted: {first}" in await ben.locator(".flash").inner_text()
            decided = await detail(api, first)
            assert decided["status"] == "sending" and decided["claim"] is None
            assert [d["reviewer"] for d in decided["decisions"]] == ["ben"]
            trail = [(c["action"], c["reviewer"], c["previous"]) for c in decided["claims"]]
            assert trail[0] == ("claimed", "ana", None)
            assert ("taken over", "ben", "ana") in trail and trail[-1] == ("decided", "ben", None)

            # the second item is ben's now, and his machine drops off the network: his claim,
            # renewed no more, runs out, and ana gets the item without taking anything over
            assert "You are working on this" in await ben.locator("#claim").inner_text()
            await ben.context.set_offline(True)
            await ana.goto(f"{web}/items/{second}")
            assert "ben is working on this" in await ana.locator("#claim").inner_text()

            async def free_for_ana() -> bool:
                await ana.reload()
                return await ana.locator("#accept").count() == 1

            await eventually(free_for_ana, timeout=CLAIM_SECONDS + 10, message="the claim ran out")
            assert "You are working on this" in await ana.locator("#claim").inner_text()
            taken = [(c["action"], c["reviewer"]) for c in (await detail(api, second))["claims"]]
            assert taken == [("claimed", "ben"), ("expired", "ben"), ("claimed", "ana")]
            assert problems == []
        finally:
            await browser.close()
