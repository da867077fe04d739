"""The processed-ledger: "has this been done?" beyond the broker's duplicate window.

Backed by a JetStream KV bucket. `claim` is an atomic create-if-absent: under any concurrency,
across processes and replicas, exactly one caller wins a key.
"""

from __future__ import annotations

import re

import nats.errors as nats_errors
import nats.js.errors as js_errors
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from . import metrics
from .errors import TransientError
from .streams import LEDGER_BUCKET

_KEY_SAFE = re.compile(r"[^A-Za-z0-9_/-]")
_FAILURES = (nats_errors.TimeoutError, TimeoutError, nats_errors.ConnectionClosedError)


def ledger_key(key: str) -> str:
    """Any string as a valid KV key, injectively: unsafe bytes become `=XX`."""
    if not key:
        raise ValueError("empty ledger key")
    return _KEY_SAFE.sub(lambda m: "".join(f"={b:02X}" for b in m.group().encode()), key)


class Ledger:
    def __init__(self, kv: KeyValue, service: str) -> None:
        self.kv = kv
        self.service = service

    @classmethod
    async def open(cls, js: JetStreamContext, service: str, bucket: str = LEDGER_BUCKET) -> Ledger:
        return cls(await js.key_value(bucket), service)

    async def claim(self, key: str, value: bytes = b"") -> bool:
        """True for the first caller ever to claim `key`; False if it was claimed before."""
        try:
            await self.kv.create(ledger_key(key), value)
        except js_errors.KeyWrongLastSequenceError:
            metrics.LEDGER_CLAIMS.labels(self.service, "seen").inc()
            return False
        except _FAILURES as exc:
            raise TransientError("ledger unavailable") from exc
        metrics.LEDGER_CLAIMS.labels(self.service, "first").inc()
        return True

    async def get(self, key: str) -> bytes | None:
        try:
            entry = await self.kv.get(ledger_key(key))
        except js_errors.KeyNotFoundError:
            return None
        except _FAILURES as exc:
            raise TransientError("ledger unavailable") from exc
        return entry.value or b""

    async def seen(self, key: str) -> bool:
        return await self.get(key) is not None

    async def release(self, key: str) -> None:
        """Forget a claim whose work failed, so a retry can claim it again."""
        try:
            await self.kv.delete(ledger_key(key))
        except _FAILURES as exc:
            raise TransientError("ledger unavailable") from exc
