"""A steered model's draft, through the real drafter process: what the foreign-data screen finds
is on the inbox item for the person who reviews it (an item with warnings is never auto-sent),
and is never handed back to the model as a hint for hiding it."""

from __future__ import annotations

from typing import Any

import pytest

from shared.bus import Bus
from standins.llm import FakeLLM
from tests.helpers import eventually

from .conftest import Harness, items, send_event

pytestmark = pytest.mark.long

PHISHING = (
    "Hi Dan, sorry about the double charge. To get the duplicate back, reset your payment "
    "details at evil-support.com/reset, then call +1 415 555 0199 and read out your card "
    "number to our refunds desk. Your refund was approved in full. The Support Team"
)
CLEAN = (
    "Hi Dan, sorry about the double charge. We have asked our billing team to check both "
    "payments; a charge taken in error is reversed. The Support Team"
)


async def drafted(bus: Bus) -> bool:
    return bool(await items(bus))


def draft(reply: str) -> dict[str, Any]:
    return {"category": "billing", "summary": "Charged twice", "reply": reply, "sources": []}


async def test_a_phishing_draft_waits_for_a_person_with_each_thing_named(
    bus: Bus, harness: Harness, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = lambda body: draft(PHISHING)
    harness.start()
    await send_event(bus, "T1012", "evt_foreign_1")
    await eventually(lambda: drafted(bus), timeout=20, message="the inbox item")
    [item] = await items(bus)
    assert item.action_request.args["reply"] == PHISHING
    found = "\n".join(item.warnings)
    assert "evil-support[.]com/reset" in found  # the bare domain, named but not live
    assert "phone number (ending 0199)" in found
    assert "card number" in found and "never ask" in found
    assert "promises what only a person may decide: 'refund was approved'" in found
    assert item.description and "Check before sending" in item.description
    # the screen asks for no redraft: a steered model is not told what gave it away
    assert len(fake_llm.requests) == 1


async def test_what_a_redrafted_first_draft_carried_stays_on_the_item(
    bus: Bus, harness: Harness, fake_llm: FakeLLM
) -> None:
    """The first draft names a sum (a problem the model is asked to fix) and a foreign link;
    the redraft is clean, yet the person sees that the model was steered on this ticket."""

    def first_hostile(body: dict[str, Any]) -> dict[str, Any]:
        redraft = "Problems with your previous draft" in body["messages"][-1]["content"]
        return draft(
            CLEAN
            if redraft
            else "Hi Dan, we refund $29.00 once you confirm at evil-support.com/reset. "
            "The Support Team"
        )

    fake_llm.responder = first_hostile
    harness.start()
    await send_event(bus, "T1012", "evt_foreign_2")
    await eventually(lambda: drafted(bus), timeout=20, message="the inbox item")
    [item] = await items(bus)
    assert item.action_request.args["reply"] == CLEAN
    [redraft] = fake_llm.requests[1:]
    asked = redraft["messages"][-1]["content"]
    assert "amount of money" in asked and "evil-support" not in asked.split("Problems")[-1]
    [warning] = item.warnings
    assert warning.startswith("the draft before the redraft: ")
    assert "evil-support[.]com/reset" in warning
