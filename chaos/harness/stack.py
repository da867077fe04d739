"""The stack under test: `desk up` in a temporary var dir, pointed at the stand-ins, and how
to find, stop and tear down its processes (the supervisor's stack.json, /proc)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from shared import catalog
from standins.channel import FakeChannel
from standins.llm import FakeLLM

from ..facts import log

SERVICES = tuple(s.name for s in catalog.SERVICES if s.supervised)  # what `desk up` starts


def read_state(var: Path) -> dict[str, Any] | None:
    try:
        return json.loads((var / "stack.json").read_text())
    except (OSError, ValueError):
        return None


def service_pid(var: Path, name: str) -> int | None:
    state = read_state(var)
    if not state:
        return None
    pid = state["services"].get(name, {}).get("pid")
    return int(pid) if pid else None


def is_service(pid: int, name: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            parts = f.read().split(b"\0")
    except OSError:
        return False
    return b"desk" in parts and name.encode() in parts


def nats_pids(var: Path) -> dict[str, int]:
    """Broker node name -> pid, as the supervisor last wrote them."""
    state = read_state(var) or {}
    return {n["name"]: int(n["pid"]) for n in state.get("nats_nodes", []) if n.get("pid")}


def is_nats(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"nats-server" in f.read()
    except OSError:
        return False


def start_stack(
    var: Path,
    llm_url: str,
    channel_url: str,
    nodes: int = 1,
    extra: dict[str, str] | None = None,
) -> tuple[subprocess.Popen[bytes], dict[str, Any], dict[str, Any]]:
    channel_secret = "whsec_" + base64.b64encode(os.urandom(24)).decode()
    return launch_stack(
        var,
        {
            **(extra or {}),
            "DESK_RECONCILE_INTERVAL": "2",
            "DESK_RECONCILE_GRACE": "2",  # tickets only the reconciler finds are found quickly
            "DESK_RETRY_INITIAL": "0.3",
            "DESK_ACK_WAIT": "5",
            "DESK_MAX_DELIVER": "20",
            "DESK_LLM_BASE_URL": llm_url,
            "DESK_LLM_API_KEY": "x",
            "DESK_LLM_PROBE_INTERVAL": "5",  # a model outage's end is found within seconds
            "DESK_LLM_TIMEOUT": "10",  # and its hanging third costs a probe 10 s, not 60
            "DESK_CHANNEL": "webhook",
            "DESK_CHANNEL_URL": channel_url,
            "DESK_CHANNEL_SECRET": channel_secret,
            "DESK_BREAKER_OPEN_SECONDS": "2",
            "DESK_DRAIN_TIMEOUT": "5",
            "DESK_NATS_NODES": str(nodes),
            "DESK_STREAM_REPLICAS": str(nodes),
        },
    )


def launch_stack(
    var: Path, settings: dict[str, str]
) -> tuple[subprocess.Popen[bytes], dict[str, Any], dict[str, Any]]:
    """`desk up` in `var` with these DESK_ settings (free ports; nothing from this shell's
    DESK_ environment); returns the supervisor, its stack.json and its dev credentials once
    every service answers /readyz."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DESK_")}
    env.update({"DESK_VAR_DIR": str(var), "DESK_INGRESS_PORT": "0", "DESK_INBOX_API_PORT": "0"})
    env.update(settings)
    out = open(var / "desk-up.log", "wb")
    stack = subprocess.Popen(
        [sys.executable, "-m", "desk", "up"], env=env, stdout=out, stderr=subprocess.STDOUT
    )
    out.close()
    deadline = time.monotonic() + 60
    while True:
        state = read_state(var)
        if state and all(state["services"][s].get("pid") for s in SERVICES):
            break
        if stack.poll() is not None:
            raise RuntimeError(
                f"desk up exited with {stack.returncode}; see {var}/desk-up.log{_tail(var)}"
            )
        if time.monotonic() > deadline:
            raise RuntimeError(f"the stack did not start in 60s; see {var}/desk-up.log{_tail(var)}")
        time.sleep(0.2)
    creds = json.loads(Path(state["credentials"]).read_text())
    # every service answers /readyz
    with httpx.Client(timeout=2) as client:
        for name in SERVICES:
            url = state["services"][name]["ops_url"]
            while True:
                try:
                    if client.get(f"{url}/readyz").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{name} not ready in 60s; see {var}/log/{name}.log")
                time.sleep(0.2)
    return stack, state, creds


def _tail(var: Path, lines: int = 15) -> str:
    """The end of `desk up`'s own output, for a start that failed (the var dir may be gone by
    the time anyone looks, on a CI machine)."""
    try:
        text = (var / "desk-up.log").read_text(errors="replace")
    except OSError:
        return ""
    return "".join("\n  | " + line for line in text.splitlines()[-lines:])


def tear_down(
    stack: subprocess.Popen[bytes] | None,
    channel: FakeChannel,
    llm: FakeLLM,
    var: Path,
    *,
    keep: bool,
) -> None:
    """Stop the stack and the stand-ins; remove the var dir unless its logs should be kept."""
    if stack is not None:
        stop_stack(stack)
    channel.stop()
    llm.stop()
    if keep:
        log(f"logs kept in {var}/log (the stack's own output in {var}/desk-up.log)")
    else:
        shutil.rmtree(var, ignore_errors=True)


def stop_stack(stack: subprocess.Popen[bytes]) -> None:
    if stack.poll() is not None:
        return
    stack.send_signal(signal.SIGINT)
    try:
        stack.wait(60)
    except subprocess.TimeoutExpired:
        stack.kill()
        stack.wait(10)
