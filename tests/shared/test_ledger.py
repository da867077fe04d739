from __future__ import annotations

import asyncio

from shared.bus import Bus
from shared.ledger import Ledger, ledger_key


def test_keys_are_valid_for_the_kv_store_and_distinct() -> None:
    raw = ["decision:T1:v1", "helpdesk:e1>drafter", "T1/reply", "a=3A", "x y", "工单"]
    keys = [ledger_key(k) for k in raw]
    assert len(set(keys)) == len(raw)
    for key in keys:
        assert all(c.isalnum() or c in "-_/=" for c in key) and key.isascii()


async def test_exactly_one_of_many_concurrent_claims_wins(bus: Bus) -> None:
    ledger = await Ledger.open(bus.js, "test")
    results = await asyncio.gather(*(ledger.claim("helpdesk:e1") for _ in range(20)))
    assert results.count(True) == 1
    assert await ledger.seen("helpdesk:e1")
    assert not await ledger.seen("helpdesk:e2")


async def test_a_released_claim_can_be_claimed_again(bus: Bus) -> None:
    ledger = await Ledger.open(bus.js, "test")
    assert await ledger.claim("k", b"v1")
    assert await ledger.get("k") == b"v1"
    await ledger.release("k")
    assert not await ledger.seen("k")
    assert await ledger.claim("k", b"v2")
