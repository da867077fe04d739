from __future__ import annotations

import asyncio

import nats.js.errors as js_errors
import pytest
from nats.js.api import KeyValueConfig
from pydantic import ValidationError

from shared.bus import Bus
from shared.errors import Unavailable
from shared.ledger import SHARED_BUCKET, Ledger, ledger_key
from shared.settings import ARCHIVE_MIN_DAYS, DeskSettings
from shared.streams import DAY, RETENTION, Topology, provision
from tests.helpers import eventually


def test_keys_are_valid_for_the_kv_store_and_distinct() -> None:
    raw = ["decision:T1:v1", "helpdesk:e1>drafter", "T1/reply", "a=3A", "x y", "工单"]
    keys = [ledger_key(k) for k in raw]
    assert len(set(keys)) == len(raw)
    for key in keys:
        assert all(c.isalnum() or c in "-_/=" for c in key) and key.isascii()


async def test_exactly_one_of_many_concurrent_claims_wins(bus: Bus) -> None:
    ledger = await Ledger.open(bus.js, "drafter")
    results = await asyncio.gather(*(ledger.claim("helpdesk:e1") for _ in range(20)))
    assert results.count(True) == 1
    assert await ledger.seen("helpdesk:e1")
    assert not await ledger.seen("helpdesk:e2")


async def test_a_released_claim_can_be_claimed_again(bus: Bus) -> None:
    ledger = await Ledger.open(bus.js, "drafter")
    assert await ledger.claim("k", b"v1")
    assert await ledger.get("k") == b"v1"
    await ledger.release("k")
    assert not await ledger.seen("k")
    assert await ledger.claim("k", b"v2")


async def test_what_a_ledger_remembers_is_forgotten_after_its_keep_period(bus: Bus) -> None:
    ledger = await Ledger.open(bus.js, "drafter", keep=1)
    assert await ledger.claim("replay:a")
    await ledger.put("thread:T1", b'{"version": 3}')
    assert not await ledger.claim("replay:a")  # within the period: seen
    kept = await Ledger.open(bus.js, "drafter")  # no period: for good
    assert await kept.claim("mail:b")

    async def forgotten() -> bool:
        return not await ledger.seen("replay:a") and not await ledger.seen("thread:T1")

    await eventually(forgotten, timeout=10, message="the claims' TTL to pass")
    assert await ledger.claim("replay:a")  # claimable again
    assert await kept.seen("mail:b")


def test_nothing_is_archived_while_a_stream_may_still_deliver_its_message() -> None:
    assert ARCHIVE_MIN_DAYS * DAY > max(RETENTION.values())
    with pytest.raises(ValidationError, match="archive_days"):
        DeskSettings(archive_days=30)


async def test_a_lease_is_exclusive_waits_for_the_holder_and_can_be_taken_again(bus: Bus) -> None:
    ledger = await Ledger.open(bus.js, "drafter")
    order: list[str] = []

    async def hold(name: str, seconds: float) -> None:
        async with ledger.lease("T1012", ttl=30, wait=5):
            order.append(f"{name} in")
            await asyncio.sleep(seconds)
            order.append(f"{name} out")

    await asyncio.gather(hold("a", 0.3), hold("b", 0.0))
    assert order in (["a in", "a out", "b in", "b out"], ["b in", "b out", "a in", "a out"])
    async with ledger.lease("T1012", ttl=30, wait=0):
        pass


async def test_a_busy_lease_is_a_transient_error_after_the_wait(bus: Bus) -> None:
    from shared.errors import TransientError

    ledger = await Ledger.open(bus.js, "drafter")
    async with ledger.lease("T1", ttl=30, wait=0):
        try:
            async with ledger.lease("T1", ttl=30, wait=0.2):
                raise AssertionError("two holders at once")
        except TransientError as exc:
            assert exc.retry_after


async def test_a_bucket_no_stream_answers_for_is_unavailable_not_a_failed_attempt(
    bus: Bus,
) -> None:
    """As while a cluster elects the bucket's leader again after a node died: a write finds no
    stream to answer it. That is a dependency that is down (the runtime holds the delivery),
    not an error that spends one."""
    ledger = await Ledger.open(bus.js, "drafter")
    await bus.js.delete_stream("KV_desk_ledger_drafter")
    with pytest.raises(Unavailable, match="ledger unavailable"):
        async with ledger.lease("helpdesk:e1>drafter", ttl=5, wait=1):
            pass
    with pytest.raises(Unavailable, match="ledger unavailable"):
        await ledger.claim("helpdesk:e1")


async def test_a_lease_whose_holder_died_expires(bus: Bus) -> None:
    ledger = await Ledger.open(bus.js, "drafter")
    await ledger.kv.create("lease=3AT2", b"", msg_ttl=1)  # as if a holder died holding it
    async with ledger.lease("T2", ttl=30, wait=5):
        pass


async def test_a_lease_is_renewed_while_held(bus: Bus) -> None:
    ledger = await Ledger.open(bus.js, "drafter")
    async with ledger.lease("T3", ttl=1, wait=0):
        key = ledger_key("lease:T3")

        async def revision() -> int:
            return (await ledger.kv.get(key)).revision or 0

        created = await revision()

        async def renewed_six_times() -> bool:  # every third of the TTL: twice the TTL by now
            return await revision() - created >= 6

        await eventually(renewed_six_times, message="six renewals")
        from shared.errors import TransientError

        try:
            async with ledger.lease("T3", ttl=1, wait=0):
                raise AssertionError("the lease lapsed while held")
        except TransientError:
            pass


async def test_a_lease_ends_with_its_block_even_if_a_renewal_swallows_the_cancel(
    bus: Bus,
) -> None:
    """On Python 3.11, cancelling a task awaiting a PubAck can be swallowed (asyncio.wait_for
    inside nats-py) when the ack arrives at the same moment. The renewal must stop anyway."""
    ledger = await Ledger.open(bus.js, "drafter")
    publish = bus.js.publish
    in_renewal = asyncio.Event()

    async def publish_that_swallows_cancel(*args: object, **kwargs: object) -> object:
        call = asyncio.ensure_future(publish(*args, **kwargs))  # type: ignore[arg-type]
        headers = kwargs.get("headers") or {}
        if headers.get("Nats-Expected-Last-Subject-Sequence", "0") != "0":  # type: ignore[attr-defined]
            in_renewal.set()  # a renewal, not the create
        try:
            return await asyncio.shield(call)
        except asyncio.CancelledError:
            return await call  # the ack arrived anyway: the cancel is lost, as in the wild

    ledger.js.publish = publish_that_swallows_cancel  # type: ignore[method-assign,assignment]
    try:
        async with ledger.lease("T4", ttl=1, wait=0):
            await asyncio.wait_for(in_renewal.wait(), 5)  # leave while a renewal is in flight
        # the block ended: the key is free at once, and stays free (no renewal left running)
        renewals = [
            t for t in asyncio.all_tasks() if getattr(t.get_coro(), "__name__", "") == "_renew"
        ]
        assert renewals == []
        async with ledger.lease("T4", ttl=30, wait=0):
            pass
    finally:
        ledger.js.publish = publish  # type: ignore[method-assign]


async def test_provision_moves_the_shared_bucket_into_each_owners_own(bus: Bus) -> None:
    """After an upgrade the router's `seen:` keys must still be known to the reconciler (or it
    would backfill every ticket again) and the drafter must still know each mail's thread."""
    old = await bus.js.create_key_value(KeyValueConfig(bucket=SHARED_BUCKET, history=1))
    for key, value in {
        "seen:ticket.created:T1": b"",
        "mail:0123": b"T7",
        "cron:stale:T2:2026-11-30": b"",
        "lease:thread:T7": b"",  # a lease lapses by itself: not carried over
    }.items():
        await old.create(ledger_key(key), value)
    drafter = await Ledger.open(bus.js, "drafter")
    await drafter.claim("mail:0123", b"T8")  # the owner's own claim wins over the old copy

    changes = await provision(bus.js, Topology(), adopt_shared_ledger=True)

    assert changes[f"KV_{SHARED_BUCKET}"] == "migrated"
    router = await Ledger.reader(bus.js, "reconciler", "router")
    assert await router.seen("seen:ticket.created:T1")
    assert await drafter.get("mail:0123") == b"T8"
    assert await (await Ledger.open(bus.js, "reconciler")).seen("cron:stale:T2:2026-11-30")
    for owner in ("router", "drafter", "reconciler", "sender"):
        assert not await (await Ledger.open(bus.js, owner)).seen("lease:thread:T7")
    with pytest.raises(js_errors.BucketNotFoundError):
        await bus.js.key_value(SHARED_BUCKET)
    again = await provision(bus.js, Topology(), adopt_shared_ledger=True)
    assert f"KV_{SHARED_BUCKET}" not in again
