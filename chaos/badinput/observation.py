"""The stack seen from outside: the broker's message counts and consumers, the processes,
their readiness and their error logs."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from shared import subjects

from ..harness.observation import consumers
from ..harness.stack import SERVICES
from .campaign import SOURCES


async def stored_counts(admin_url: str) -> dict[str, int]:
    """Messages per ingress source in EVENTS, and decisions in INBOX."""
    from shared.bus import Bus

    bus = await Bus.connect(admin_url, service="badinput", reconnect=False)
    try:
        counts: dict[str, int] = {}
        for source in SOURCES:
            info = await bus.js.stream_info(
                subjects.EVENTS, subjects_filter=subjects.events_of(source)
            )
            counts[source] = sum((info.state.subjects or {}).values())
        info = await bus.js.stream_info(subjects.INBOX, subjects_filter=subjects.INBOX_DECISION)
        counts["decisions"] = sum((info.state.subjects or {}).values())
        counts["auto_decisions"] = await _auto_decisions(bus)
        return counts
    finally:
        await bus.close()


async def _auto_decisions(bus: Any) -> int:
    """Decisions the inbox's auto-send policy took (no person's: `auto` set)."""
    info = await bus.js.stream_info(subjects.INBOX)
    found = 0
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        try:
            msg = await bus.js.get_msg(subjects.INBOX, seq)
        except Exception:  # deleted or aged out
            continue
        if msg.subject == subjects.INBOX_DECISION and msg.data and b'"auto":true' in msg.data:
            found += 1
    return found


def wait_for(check: Callable[[], bool], timeout: float, every: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(every)


def drained(admin_url: str) -> bool:
    infos = asyncio.run(consumers(admin_url))
    return all(not (c.num_pending or 0) and not (c.num_ack_pending or 0) for c in infos.values())


def broker_pids(var: Path) -> set[int]:
    """The nats-server processes of this stack (their config files live in its var dir)."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    parts = f.read().split(b"\0")
            except OSError:
                continue
            if (
                parts
                and parts[0].endswith(b"nats-server")
                and str(var).encode() in b" ".join(parts)
            ):
                found.add(int(entry))
    return found


def readiness(state: dict[str, Any]) -> dict[str, int | str]:
    found: dict[str, int | str] = {}
    with httpx.Client(timeout=5) as client:
        for name in SERVICES:
            try:
                ops = state["services"][name]["ops_url"]
                found[name] = client.get(f"{ops}/readyz").status_code
            except httpx.HTTPError as exc:
                found[name] = exc.__class__.__name__
    return found


def logged_errors(var: Path) -> tuple[Counter[str], list[str]]:
    """ERROR lines per service log, and a few of them (message and the error's last line)."""
    found: Counter[str] = Counter()
    samples: list[str] = []
    for path in sorted((var / "log").glob("*.log")):
        if path.stem not in SERVICES:
            continue
        with open(path, errors="replace") as f:
            for line in f:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if entry.get("level") not in ("ERROR", "CRITICAL"):
                    continue
                found[path.stem] += 1
                if len(samples) < 5:
                    error = (entry.get("error") or "").strip().splitlines()
                    samples.append(
                        f"{path.stem}: {str(entry.get('message', ''))[:80]}"
                        f"{' / ' + error[-1][:160] if error else ''}"
                    )
    return found, samples
