"""`desk status`: where the running stack is and whether each service is healthy (asked on each
service's ops port, where `/healthz` is; the public ports serve only the services' routes)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx

from .process import alive
from .statefile import STATE_FILE


class NoStack(RuntimeError):
    pass


async def _healthy(client: httpx.AsyncClient, url: str) -> bool:
    try:
        answer = await client.get(f"{url}/healthz")
    except httpx.HTTPError:
        return False
    return answer.status_code == 200


async def _degraded(client: httpx.AsyncClient, url: str) -> dict[str, str]:
    """What the service says is impaired (`/readyz`'s `degraded`: the model down)."""
    try:
        found = (await client.get(f"{url}/readyz")).json().get("degraded") or {}
    except (httpx.HTTPError, ValueError, AttributeError):
        return {}
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


async def collect(var_dir: Path) -> dict[str, Any]:
    path = Path(var_dir).resolve() / STATE_FILE
    try:
        state = json.loads(path.read_text())
    except FileNotFoundError:
        raise NoStack(
            f"no stack is running from {path.parent} (start one with `desk up`)"
        ) from None
    if not alive(int(state.get("pid", 0))):
        raise NoStack(f"the stack recorded in {path} is no longer running")
    services = state["services"]
    async with httpx.AsyncClient(timeout=2.0) as client:
        health = await asyncio.gather(*(_healthy(client, s["ops_url"]) for s in services.values()))
        degraded = await asyncio.gather(
            *(_degraded(client, s["ops_url"]) for s in services.values())
        )
    return {
        "nats_url": state["nats_url"],
        "credentials": state["credentials"],
        "services": {
            name: {
                "url": s["url"],
                "ops_url": s["ops_url"],
                "healthy": ok,
                "pid": s["pid"],
                "degraded": impaired,
            }
            for (name, s), ok, impaired in zip(services.items(), health, degraded, strict=True)
        },
    }


def render(status: dict[str, Any]) -> str:
    lines = [f"nats         {status['nats_url']}", f"credentials  {status['credentials']}"]
    for name, s in status["services"].items():
        mark = "healthy" if s["healthy"] else "DOWN"
        public = s["url"] or "-"
        lines.append(f"{name:<12} {public:<26} ops {s['ops_url']:<26} pid {s['pid']!s:<8} {mark}")
        for what, why in (s.get("degraded") or {}).items():
            lines.append(f"{'':<12} {what}: {why}")
    return "\n".join(lines)
