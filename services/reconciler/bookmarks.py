"""Where the reconciler left off (JetStream KV): the backfill cursor and the last cron runs."""

from __future__ import annotations

import datetime as dt

import nats.js.errors as js_errors
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from shared.catalog import STATE as STATE_BUCKET

CURSOR = "reconciler.cursor"
LAST_STALE = "reconciler.stale.last"
LAST_REPORT = "reconciler.report.last"


class Bookmarks:
    """The reconciler's bookmarks, one timestamp per key, in the state bucket."""

    def __init__(self, kv: KeyValue) -> None:
        self.kv = kv

    @classmethod
    async def open(cls, js: JetStreamContext) -> Bookmarks:
        return cls(await js.key_value(STATE_BUCKET))

    async def get_time(self, key: str) -> dt.datetime | None:
        try:
            entry = await self.kv.get(key)
        except js_errors.KeyNotFoundError:
            return None
        try:
            return dt.datetime.fromisoformat((entry.value or b"").decode())
        except ValueError:
            return None

    async def set_time(self, key: str, value: dt.datetime) -> None:
        await self.kv.put(key, value.isoformat().encode())
