"""`desk up` as a user runs it: everything healthy, crashes healed, Ctrl-C leaves nothing behind."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from shared import subjects
from shared.bus import Bus
from shared.envelope import Envelope
from shared.inbox import InboxItem
from tests.helpers import eventually, messages

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)

SERVICES = {"ingress", "router", "drafter", "inbox_api", "sender", "reconciler"}


def descendants(pid: int) -> set[int]:
    """Every live process below `pid`, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


class Stack:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.var = root / "var"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("DESK_")}
        self.env.update(
            {
                "DESK_VAR_DIR": str(self.var),
                "DESK_INGRESS_PORT": "0",
                "DESK_INBOX_API_PORT": "0",
                "DESK_RECONCILE_INTERVAL": "2",
                "DESK_RECONCILE_GRACE": "1",
            }
        )
        self.log = root / "desk-up.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def up(self) -> subprocess.Popen[bytes]:
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "desk", "up"],
                cwd=self.root,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        return self.proc

    def status(self) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, "-m", "desk", "status", "--json"],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            timeout=20,
        )
        if not done.stdout.strip():
            return {}
        result: dict[str, Any] = json.loads(done.stdout)
        return result

    def state(self) -> dict[str, Any]:
        path = self.var / "stack.json"
        return json.loads(path.read_text()) if path.exists() else {}


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    s = Stack(tmp_path)
    try:
        yield s
    finally:
        if s.proc is not None and s.proc.poll() is None:
            leftovers = descendants(s.proc.pid)
            s.proc.kill()
            s.proc.wait()
            for pid in leftovers:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def desk(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "desk", *args],
        cwd=stack.root,
        env=stack.env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _sent_in_inbox(stack: Stack) -> bool:
    shown = desk(stack, "inbox", "show", "T1012~v1")
    return shown.returncode == 0 and "sent" in shown.stdout.split("\n", 3)[1]


def all_healthy(stack: Stack) -> bool:
    services = stack.state().get("services", {})
    if set(services) != SERVICES:
        return False
    with httpx.Client(timeout=1) as client:  # one client: each new one costs ~20 ms of CPU
        for s in services.values():
            try:
                if client.get(f"{s['ops_url']}/healthz").status_code != 200:
                    return False
            except httpx.HTTPError:
                return False
    return True


async def test_desk_up_runs_heals_and_stops_the_whole_system(stack: Stack) -> None:
    supervisor = stack.up()
    await eventually(
        lambda: "Ambient Desk is up" in stack.log.read_text(), timeout=90, message="the banner"
    )
    said = stack.log.read_text()
    assert said.index("starting the services") < said.index("Ambient Desk is up.")
    status = stack.status()  # the banner comes once every service is ready, not before
    assert all(s["healthy"] for s in status["services"].values()), status
    await eventually(lambda: all_healthy(stack), timeout=60, message="six healthy services")

    status = stack.status()
    assert set(status["services"]) == SERVICES
    assert all(s["healthy"] for s in status["services"].values()), status
    assert status["nats_url"].startswith("nats://127.0.0.1:")
    creds_path = Path(status["credentials"])
    assert stat.S_IMODE(creds_path.stat().st_mode) == 0o600
    creds = json.loads(creds_path.read_text())
    assert creds["webhook_secrets"]["helpdesk"].startswith("whsec_")
    assert creds["reviewer_token"] and creds["viewer_token"]
    for name, s in status["services"].items():
        assert httpx.get(f"{s['ops_url']}/readyz", timeout=2).status_code == 200
        # health and metrics only on the ops port; only ingress and the inbox have public ports
        assert (s["url"] is not None) == (name in {"ingress", "inbox_api"}), (name, s)
        if s["url"] is not None:
            for path in ("/healthz", "/readyz", "/metrics"):
                assert httpx.get(f"{s['url']}{path}", timeout=2).status_code == 404, (name, path)
    banner = stack.log.read_text()
    assert "health and metrics (/healthz, /readyz, /metrics" in banner
    assert all(s["ops_url"] in banner for s in status["services"].values()), banner

    # A signed webhook travels ingress -> EVENTS -> router -> work.drafter.*
    sent = subprocess.run(
        [sys.executable, "-m", "desk", "send-webhook", "--ticket", "T1012", "--repeat", "2"],
        cwd=stack.root,
        env=stack.env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert sent.returncode == 0, sent.stderr
    answers = [json.loads(line.split(" ", 1)[1]) for line in sent.stdout.splitlines()]
    assert [a["duplicate"] for a in answers] == [False, True]
    bus = await Bus.connect(stack.state()["nats_admin_url"], service="test")
    try:

        async def drafted() -> bool:
            work = await messages(bus.js, subjects.WORK)
            return [m.subject for m in work] == ["work.drafter.ticket.created"]

        await eventually(drafted, timeout=20, message="the event on work.drafter")
        [work] = await messages(bus.js, subjects.WORK)
        routed = Envelope.model_validate_json(work.data)
        assert routed.data["data"]["ticket_id"] == "T1012"
        # the ticket's own priority (high) went with it: the demo rules' urgent queue
        assert routed.data["data"]["priority"] == "high"
        assert (routed.model_extra or {}).get("queue") == "urgent"

        async def in_inbox() -> bool:
            return any(
                m.subject == subjects.INBOX_ITEM for m in await messages(bus.js, subjects.INBOX)
            )

        await eventually(in_inbox, timeout=20, message="the offline draft in the inbox")
        [item] = [
            m for m in await messages(bus.js, subjects.INBOX) if m.subject == subjects.INBOX_ITEM
        ]
        drafted_item = InboxItem.model_validate(Envelope.model_validate_json(item.data).data)
        assert drafted_item.thread == "T1012"
        assert drafted_item.category == "refund"
        assert drafted_item.trigger.queue == "urgent"  # the drafter kept the router's queue
    finally:
        await bus.close()

    # A reviewer accepts it in the inbox; exactly one reply.sent comes out the other end.
    await eventually(
        lambda: desk(stack, "inbox", "show", "T1012~v1").returncode == 0,
        timeout=20,
        message="the item in the inbox API",
    )
    accepted = desk(stack, "inbox", "accept", "T1012~v1")
    assert accepted.returncode == 0, accepted.stderr
    tail = desk(stack, "results", "tail", "--all", "--count", "1", "--timeout", "20")
    assert tail.returncode == 0, tail.stderr
    [event] = [json.loads(line) for line in tail.stdout.splitlines()]
    assert (event["type"], event["data"]["ticket_id"]) == ("reply.sent", "T1012")
    assert event["data"]["text"] == drafted_item.action_request.args["reply"]
    again = desk(stack, "inbox", "ignore", "T1012~v1")  # decided already: refused
    assert again.returncode != 0 and "409" in again.stderr
    bus = await Bus.connect(stack.state()["nats_admin_url"], service="test")
    try:
        await eventually(lambda: _sent_in_inbox(stack), timeout=20, message="status sent")
        assert len(await messages(bus.js, subjects.RESULTS)) == 1
    finally:
        await bus.close()

    # A ticket created in the helpdesk without any webhook is backfilled into the inbox, once.
    created = desk(
        stack,
        "helpdesk",
        "create",
        "--customer",
        "C001",
        "--subject",
        "Where is my refund?",
        "--body",
        "I returned the parcel two weeks ago.",
    )
    assert created.returncode == 0, created.stderr
    new_ticket = created.stdout.split()[0]
    await eventually(
        lambda: desk(stack, "inbox", "show", f"{new_ticket}~v1").returncode == 0,
        timeout=30,
        message="the backfilled ticket drafted",
    )
    listed = desk(stack, "inbox", "list", "--all", "--text", new_ticket)
    assert listed.stdout.count(f"{new_ticket}~v") == 1

    seen = descendants(supervisor.pid)
    router_pid = status["services"]["router"]["pid"]
    router_url = status["services"]["router"]["ops_url"]
    os.kill(router_pid, signal.SIGKILL)
    # Something else takes the router's port before it restarts (as an outgoing connection's
    # local port can): the supervisor must move it rather than restart it into a busy port.
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)

    def squat() -> bool:  # as soon as the dead router's socket is gone (the restart waits 0.5 s)
        try:
            squatter.bind(("127.0.0.1", int(router_url.rsplit(":", 1)[1])))
        except OSError:
            return False
        return True

    await eventually(squat, timeout=2, interval=0.005, message="the router's port free")
    squatter.listen()

    def router_back() -> bool:
        now = stack.status().get("services", {}).get("router", {})
        return bool(now.get("healthy")) and now.get("pid") not in (None, router_pid)

    try:
        await eventually(router_back, timeout=30, message="the router restarted and healthy")
    finally:
        squatter.close()
    assert stack.status()["services"]["router"]["ops_url"] != router_url
    seen |= descendants(supervisor.pid)

    supervisor.send_signal(signal.SIGINT)
    assert supervisor.wait(timeout=60) == 0
    left = sorted(pid for pid in seen if alive(pid))
    assert left == [], f"processes left behind: {left}"
    assert not (stack.var / "stack.json").exists()
    assert stack.status() == {}
