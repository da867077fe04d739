"""Load on the stack's HTTP edges: signed webhooks to ingress, at a steady rate or as fast as
it takes them, and an accept for each waiting item through the inbox API."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx


async def send_all(
    ingress: httpx.AsyncClient,
    requests: list[tuple[str, bytes, dict[str, str]]],
    *,
    rate: float | None,
    connections: int = 16,
) -> dict[str, float]:
    """POST each request; at `rate` per second if given, else as fast as `connections` allow.
    Returns ticket -> perf_counter() at its 202."""
    accepted: dict[str, float] = {}
    queue: asyncio.Queue[tuple[str, bytes, dict[str, str]]] = asyncio.Queue()

    async def post(tid: str, body: bytes, headers: dict[str, str]) -> None:
        for _ in range(20):
            answer = await ingress.post("/webhooks/helpdesk", content=body, headers=headers)
            if answer.status_code == 202:
                accepted[tid] = time.perf_counter()
                return
            await asyncio.sleep(0.1)
        raise RuntimeError(f"ingress kept refusing {tid}: {answer.status_code} {answer.text}")

    if rate:
        started = time.perf_counter()
        tasks = []
        for i, (tid, body, headers) in enumerate(requests):
            delay = started + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(post(tid, body, headers)))
        await asyncio.gather(*tasks)
        return accepted

    for request in requests:
        queue.put_nowait(request)

    async def worker() -> None:
        while not queue.empty():
            await post(*queue.get_nowait())

    await asyncio.gather(*(worker() for _ in range(connections)))
    return accepted


async def waiting_items(inbox: httpx.AsyncClient, tickets: set[str]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        params = {"status": "waiting", "limit": "200"}
        if cursor:
            params["cursor"] = cursor
        page = (await inbox.get("/api/items", params=params)).json()
        items += [i for i in page["items"] if i["ticket_id"] in tickets]
        cursor = page.get("next_cursor")
        if not cursor:
            return items


async def decide_all(
    inbox: httpx.AsyncClient, items: list[dict[str, Any]], connections: int = 16
) -> dict[str, float]:
    decided: dict[str, float] = {}
    queue = list(items)

    async def worker() -> None:
        while queue:
            item = queue.pop()
            body = {"type": "accept", "version": item["version"]}
            answer = await inbox.post(f"/api/items/{item['id']}/decision", json=body)
            if answer.status_code != 202:
                raise RuntimeError(f"decision refused: {answer.status_code} {answer.text}")
            decided[item["ticket_id"]] = time.perf_counter()

    await asyncio.gather(*(worker() for _ in range(connections)))
    return decided
