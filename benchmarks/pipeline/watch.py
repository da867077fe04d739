"""Watching the inbox API: when each ticket's item first became visible."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import httpx

# How often the inbox API's list is read to see items arrive. Each read (20 newest items) costs
# the inbox API ~5 ms of CPU: read every 20 ms, that was 0.2 of a core and half of what the
# inbox API spent per event. A reviewer's browser reads it every few seconds. Latencies are
# measured from the first read that shows the item: at most the interval late.
LATENCY_POLL = 0.05
STRAGGLER_WAIT = 2.0  # seconds without a new item before the whole waiting list is read
THROUGHPUT_POLL = 0.25


@dataclass
class Watch:
    """When each ticket's item first became visible in the inbox API (by polling newest-first)."""

    client: httpx.AsyncClient
    seen: dict[str, float] = field(default_factory=dict)
    polls: int = 0

    async def poll(self, params: dict[str, str] | None = None) -> int:
        """Read the list until a page shows an item seen before; how many were new."""
        cursor, found = None, 0
        while True:
            query = dict(params or {"sort": "newest", "limit": "20"})  # bursts page on
            if cursor:
                query["cursor"] = cursor
            answer = await self.client.get("/api/items", params=query)
            now = time.perf_counter()
            self.polls += 1
            if answer.status_code != 200:
                return found
            page = answer.json()
            fresh = 0
            for item in page["items"]:
                if item["ticket_id"] not in self.seen:
                    self.seen[item["ticket_id"]] = now
                    fresh += 1
            found += fresh
            cursor = page.get("next_cursor")
            # newest first: a page with anything already known reaches back far enough
            if not cursor or (params is None and fresh < len(page["items"])):
                return found

    async def until(self, wanted: set[str], deadline: float, interval: float) -> None:
        quiet_since = time.perf_counter()
        while not wanted <= self.seen.keys():
            now = time.perf_counter()
            if now > deadline:
                missing = len(wanted - self.seen.keys())
                raise RuntimeError(f"{missing} items never became visible in the inbox API")
            if await self.poll():
                quiet_since = now
            elif now - quiet_since > STRAGGLER_WAIT:
                # Items are stored by several handlers at once: one may be committed after a
                # newer one was already seen, below it in the newest-first list, where the
                # reading above stops. Read everything that waits, once in a while.
                await self.poll({"status": "waiting", "limit": "200"})
                quiet_since = now
            await asyncio.sleep(interval)
