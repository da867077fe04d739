"""What `desk up` says once the stack is up: it waits for every service's /readyz (or Ctrl-C),
then prints where everything is, naming the services not ready yet."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import httpx

from .broker import Broker
from .supervisor import ServiceProcess

READY_WITHIN = 60.0  # seconds the banner waits for every service's /readyz


async def until_ready(
    children: dict[str, ServiceProcess], within: float, stop: asyncio.Event
) -> list[str]:
    """Wait until every service answers /readyz (or `stop` is set); the ones still not ready."""
    deadline = time.monotonic() + within
    pending = list(children)
    async with httpx.AsyncClient(timeout=2) as client:
        while pending and time.monotonic() < deadline and not stop.is_set():
            for name in list(pending):
                try:
                    answer = await client.get(f"{children[name].ops_url}/readyz")
                except httpx.HTTPError:
                    continue
                if answer.status_code == 200:
                    pending.remove(name)
            if pending:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 0.2)
    return pending


def banner(
    broker: Broker,
    children: dict[str, ServiceProcess],
    creds_path: Path,
    log_dir: Path,
    waiting: list[str],
) -> str:
    lines = [
        "Ambient Desk is up."
        if not waiting
        else f"Ambient Desk is up, but not ready yet: {', '.join(waiting)} (see the logs).",
        f"  {'nats':<12} {broker.url}  ({broker.description()})",
    ]
    hint = {"ingress": "  POST /webhooks/{source}", "inbox_api": "  review inbox"}
    for name, c in children.items():
        if c.url is not None:
            lines.append(f"  {name:<12} {c.url}{hint.get(name, '')}")
    lines.append("  health and metrics (/healthz, /readyz, /metrics; not on the ports above):")
    lines += [f"    {name:<10} {c.ops_url}" for name, c in children.items()]
    lines += [
        f"  {'credentials':<12} {creds_path}",
        f"  {'logs':<12} {log_dir}",
        "`desk status` shows health; Ctrl-C stops everything.",
    ]
    return "\n".join(lines)
