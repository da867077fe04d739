"""What `desk up` says once the stack is up: it waits for every service's /readyz (or Ctrl-C),
then prints where everything is, naming the services not ready yet: first the page to open,
where the token to log in with is kept (never the token: the banner may end up in a log) and
the model that drafts."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from pathlib import Path

import httpx

from shared.bus import without_credentials
from shared.settings import DeskSettings, DrafterSettings, InboxApiSettings

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
    settings: Mapping[str, DeskSettings],
) -> str:
    inbox, drafter = settings["inbox_api"], settings["drafter"]
    assert isinstance(inbox, InboxApiSettings) and isinstance(drafter, DrafterSettings)
    lines = [
        "Ambient Desk is up."
        if not waiting
        else f"Ambient Desk is up, but not ready yet: {', '.join(waiting)} (see the logs).",
        f"  {'open':<12} {children['inbox_api'].url}/  the review inbox",
        f"  {'log in with':<12} {login(inbox, creds_path)}",
        f"  {'drafts by':<12} {model(drafter)}",
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


def login(inbox: InboxApiSettings, creds_path: Path) -> str:
    """Where the token that logs in to the inbox is (the token itself stays there)."""
    if inbox.reviewers:
        return "your reviewer token (its sha256 is in DESK_REVIEWERS)"
    return f'"reviewer_token" in {creds_path} ("viewer_token" only reads)'


def model(drafter: DrafterSettings) -> str:
    """The model that drafts, and where it answers."""
    if not drafter.llm_base_url:
        return "the built-in offline model (set DESK_LLM_BASE_URL and DESK_LLM_MODEL for yours)"
    return f"{drafter.llm_model} at {without_credentials(drafter.llm_base_url)}"
