"""The stack a run measures: `desk up` in a fresh directory, its services' processes (and
replicas beyond the supervisor's), their CPU and memory; and the run's progress lines."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.harness.stack import SERVICES, launch_stack, stop_stack
from desk.process import free_port

from ..processes import Child, cpu_seconds, rss_mib

STACK_SETTINGS = {
    "DESK_RECONCILE_INTERVAL": "86400",  # bench tickets arrive by webhook only
    "DESK_CHANNEL_RATE": "100000",  # the outbox channel: no external rate limit to respect
    "DESK_CHANNEL_BURST": "1000",
    "DESK_LOG_LEVEL": "WARNING",
}


def log(text: str) -> None:
    print(f"[pipeline {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


@dataclass
class Rig:
    var: Path
    state: dict[str, Any]
    creds: dict[str, Any]
    helpdesk_url: str
    replicas: dict[str, list[Child]] = field(default_factory=dict)  # beyond the supervisor's

    @property
    def ingress(self) -> str:
        return str(self.state["services"]["ingress"]["url"])

    @property
    def inbox(self) -> str:
        return str(self.state["services"]["inbox_api"]["url"])

    @property
    def admin_url(self) -> str:
        return str(self.state["nats_admin_url"])

    def memory(self) -> dict[str, float | None]:
        return {name: rss_mib(int(self.state["services"][name]["pid"] or 0)) for name in SERVICES}

    def cpu(self) -> dict[str, float]:
        """CPU seconds used so far by each service, the broker (every node) and this process
        (the load generator and the poller of the inbox API, on the same machine)."""
        used = {
            name: cpu_seconds(int(self.state["services"][name]["pid"] or 0))
            + sum(cpu_seconds(child.pid) for child in self.replicas.get(name, ()))
            for name in SERVICES
        }
        nodes = [int(n["pid"]) for n in self.state.get("nats_nodes", []) if n.get("pid")]
        used["nats-server"] = sum(cpu_seconds(pid) for pid in nodes)
        used["load generator"] = time.process_time()
        return used


def replica(rig: Rig, name: str, index: int) -> Child:
    """One more process of service `name`, configured as the supervisor configures its own."""
    ops_port = free_port()  # drafter and sender have no public routes: health and metrics only
    env = {k: v for k, v in os.environ.items() if not k.startswith("DESK_")}
    env.update(STACK_SETTINGS)
    env.update(
        {
            "DESK_NATS_URL": rig.state["nats_url"],
            "DESK_NATS_USER": name,
            "DESK_NATS_PASSWORD": rig.creds["nats_passwords"][name],
            "DESK_HTTP_HOST": "127.0.0.1",
            "DESK_OPS_PORT": str(ops_port),
            "DESK_VAR_DIR": str(rig.var),
            "DESK_PROVISION": "false",
            "DESK_INBOX_URL": rig.inbox,
        }
    )
    child = Child(["desk", name], env, rig.var / "log" / f"{name}-{index}.log")
    child.start(f"http://127.0.0.1:{ops_port}/readyz", timeout=60)
    rig.replicas.setdefault(name, []).append(child)
    return child


def run_with_stack(
    work: Callable[[Rig], Coroutine[Any, Any, dict[str, Any]]],
    settings: dict[str, str] | None = None,
    keep: bool = False,
) -> dict[str, Any]:
    """Start `desk up` in a fresh directory, run `work` against it, always stop it."""
    var = Path(tempfile.mkdtemp(prefix="desk-bench-"))
    stack = None
    ok = False
    try:
        stack, state, creds = launch_stack(var, {**STACK_SETTINGS, **(settings or {})})
        rig = Rig(var, state, creds, f"sqlite:///{var.resolve() / 'helpdesk.sqlite'}")
        result: dict[str, Any] = asyncio.run(work(rig))
        ok = True
        return result
    finally:
        if stack is not None:
            stop_stack(stack)
        if ok and not keep:
            shutil.rmtree(var, ignore_errors=True)
        else:
            log(f"logs kept in {var}/log")
