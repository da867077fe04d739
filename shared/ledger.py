"""The processed-ledger: "has this been done?" beyond the broker's duplicate window.

Backed by a JetStream KV bucket per service: only that service may write it (`shared.catalog`);
another service that needs to know what it has seen opens it with `Ledger.reader`. `claim` is
an atomic create-if-absent: under any concurrency, across processes and replicas, exactly one
caller wins a key.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import time
from collections.abc import AsyncIterator

import nats.errors as nats_errors
import nats.js.errors as js_errors
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from . import metrics
from .catalog import ledger_bucket
from .errors import TransientError, Unavailable

_KEY_SAFE = re.compile(r"[^A-Za-z0-9_/-]")
# The broker not answering for the bucket: a timeout, a lost connection, or no stream to answer
# (its leader being elected again after a node died: the request finds no responder).
FAILURES = (
    nats_errors.TimeoutError,
    TimeoutError,
    nats_errors.ConnectionClosedError,
    nats_errors.NoRespondersError,
    js_errors.NoStreamResponseError,
    js_errors.ServiceUnavailableError,
)


def ledger_key(key: str) -> str:
    """Any string as a valid KV key, injectively: unsafe bytes become `=XX`."""
    if not key:
        raise ValueError("empty ledger key")
    return _KEY_SAFE.sub(lambda m: "".join(f"={b:02X}" for b in m.group().encode()), key)


class Ledger:
    def __init__(
        self,
        js: JetStreamContext,
        kv: KeyValue,
        bucket: str,
        service: str,
        keep: float | None = None,
    ) -> None:
        self.js = js
        self.kv = kv
        self.bucket = bucket
        self.service = service
        self.keep = keep  # seconds a claim is remembered unless it says otherwise (None: ever)
        for result in metrics.CLAIM_RESULTS:  # every series exists at 0 (see shared.metrics)
            metrics.LEDGER_CLAIMS.labels(service, result)

    @classmethod
    async def open(
        cls,
        js: JetStreamContext,
        service: str,
        bucket: str | None = None,
        *,
        keep: float | None = None,
    ) -> Ledger:
        """`service`'s own ledger (or the named bucket); its claims are forgotten `keep`
        seconds after they were made (the service's DESK_ARCHIVE_DAYS), None: never."""
        bucket = bucket or ledger_bucket(service)
        return cls(js, await js.key_value(bucket), bucket, service, keep)

    @classmethod
    async def reader(cls, js: JetStreamContext, service: str, owner: str) -> Ledger:
        """`owner`'s ledger, for `service` to read (it has no right to write it)."""
        return await cls.open(js, service, ledger_bucket(owner))

    async def claim(self, key: str, value: bytes = b"", *, ttl: float | None = None) -> bool:
        """True for the first caller ever to claim `key` (within `ttl` seconds of the claim,
        when given: the broker then forgets it); False if it was claimed before."""
        ttl = self.keep if ttl is None else ttl
        msg_ttl = None if ttl is None else max(1, math.ceil(ttl))
        try:
            await self.kv.create(ledger_key(key), value, msg_ttl=msg_ttl)
        except js_errors.KeyWrongLastSequenceError:
            metrics.LEDGER_CLAIMS.labels(self.service, "seen").inc()
            return False
        except FAILURES as exc:
            raise Unavailable("ledger unavailable") from exc
        metrics.LEDGER_CLAIMS.labels(self.service, "first").inc()
        return True

    async def put(self, key: str, value: bytes, *, ttl: float | None = None) -> None:
        """Set `key` to `value` whatever it held (forgotten after `ttl` seconds, or the
        ledger's `keep`)."""
        ttl = self.keep if ttl is None else ttl
        headers = {} if ttl is None else {"Nats-TTL": f"{max(1, math.ceil(ttl))}s"}
        try:
            await self.js.publish(f"$KV.{self.bucket}.{ledger_key(key)}", value, headers=headers)
        except FAILURES as exc:
            raise Unavailable("ledger unavailable") from exc

    async def get(self, key: str) -> bytes | None:
        try:
            entry = await self.kv.get(ledger_key(key))
        except js_errors.KeyNotFoundError:
            return None
        except FAILURES as exc:
            raise Unavailable("ledger unavailable") from exc
        return entry.value or b""

    async def seen(self, key: str) -> bool:
        return await self.get(key) is not None

    @contextlib.asynccontextmanager
    async def lease(self, key: str, *, ttl: float, wait: float) -> AsyncIterator[None]:
        """Hold `key` exclusively (across processes) for the block.

        Waits up to `wait` seconds for another holder. The lease is renewed while the block
        runs and expires `ttl` seconds (at least 1) after its last renewal, so a holder that
        dies blocks the key for at most `ttl`.
        """
        name = ledger_key(f"lease:{key}")
        seconds = max(1, math.ceil(ttl))
        deadline = time.monotonic() + wait
        while True:
            try:
                revision = await self.kv.create(name, b"", msg_ttl=seconds)
                break
            except js_errors.KeyNotFoundError:
                continue  # it expired between nats-py's create and its re-check: try again now
            except js_errors.KeyWrongLastSequenceError:
                if time.monotonic() > deadline:
                    raise TransientError(f"{key} is busy", retry_after=1.0) from None
                await asyncio.sleep(0.05)
            except FAILURES as exc:
                raise Unavailable("ledger unavailable") from exc
        done = asyncio.Event()
        renewal = asyncio.create_task(self._renew(name, revision, seconds, done))
        try:
            yield
        finally:
            # The flag, not only the cancel: on Python 3.11 a cancel that lands as a renewal's
            # PubAck arrives can be swallowed inside nats-py (asyncio.wait_for), and a renewal
            # loop that outlived its block would hold the key forever.
            done.set()
            renewal.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewal
            with contextlib.suppress(*FAILURES, js_errors.KeyValueError):
                await self.kv.delete(name)

    async def _renew(self, name: str, revision: int, seconds: int, done: asyncio.Event) -> None:
        """Rewrite the lease with a fresh TTL, only if it is still ours (compare-and-set),
        until `done` is set."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), seconds / 3)
            if done.is_set():
                return
            try:
                ack = await self.js.publish(
                    f"$KV.{self.bucket}.{name}",
                    b"",
                    headers={
                        "Nats-Expected-Last-Subject-Sequence": str(revision),
                        "Nats-TTL": f"{seconds}s",
                    },
                )
            except (*FAILURES, js_errors.APIError):
                continue  # try again; at worst the lease lapses and another worker waits less
            revision = ack.seq

    async def release(self, key: str) -> None:
        """Forget a claim whose work failed, so a retry can claim it again."""
        try:
            await self.kv.delete(ledger_key(key))
        except FAILURES as exc:
            raise Unavailable("ledger unavailable") from exc


# The one bucket every service wrote before each got its own, and who owns its lasting keys
# now (by the key's prefix, as `ledger_key` writes it). Leases expire by themselves and `replay:`
# keys are newer than the split: neither is carried over.
SHARED_BUCKET = "desk_ledger"
SHARED_KEY_OWNERS = {
    ledger_key("seen:"): "router",  # the reconciler compares the helpdesk with these
    ledger_key("mail:"): "drafter",  # the conversation each mail joined
    ledger_key("cron:stale:"): "reconciler",  # reminders already sent today
}


async def adopt_shared_bucket(js: JetStreamContext) -> int | None:
    """Copy the lasting keys of the shared `desk_ledger` bucket into their owners' buckets
    (create-if-absent: a key the owner already has stays as it is), then delete it. None when
    there is no such bucket; else the number of keys copied. An admin's job (`desk provision`).
    """
    try:
        old = await js.key_value(SHARED_BUCKET)
    except js_errors.NotFoundError:  # BucketNotFoundError is one
        return None
    owners: dict[str, KeyValue] = {}
    copied = 0
    try:
        keys = await old.keys()
    except js_errors.NoKeysError:
        keys = []
    for key in keys:
        owner = next((o for p, o in SHARED_KEY_OWNERS.items() if key.startswith(p)), None)
        if owner is None:
            continue
        try:
            entry = await old.get(key)
        except js_errors.KeyNotFoundError:
            continue
        if owner not in owners:
            owners[owner] = await js.key_value(ledger_bucket(owner))
        try:
            await owners[owner].create(key, entry.value or b"")
            copied += 1
        except js_errors.KeyWrongLastSequenceError:
            pass  # the owner has it already (a run before this one, or its own claim)
    await js.delete_key_value(SHARED_BUCKET)
    return copied
