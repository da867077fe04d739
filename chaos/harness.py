"""The chaos harness: the real stack (`desk up`), a seeded workload, an auto-reviewer, faults.

    python -m chaos [--events N] [--seed S] [--deadline SECONDS] [--cluster] [--postgres [URL]]
                    [--keep]

1. Starts fakes in this process (an OpenAI-compatible LLM, a delivery channel), then the whole
   stack as `python -m desk up` in a temporary var dir, pointed at them.
2. Sends a bounded, seeded workload of signed ticket webhooks: one ticket per thread created in
   the demo helpdesk just before its first event; 20 % of sends re-send an earlier event
   (same id); 5 % name tickets that do not exist (T99xxx); some tickets get a second event with
   an OLDER version after a newer one; some tickets are created without any webhook, so only
   the reconciler can find them.
3. Conversations (chaos/conversations.py): a share of the tickets get a second customer
   message while their draft waits or after their reply was sent, an answer by a person in the
   helpdesk, or a close, each with its webhook; and two stale scans (chaos/stale.py, `desk
   reconcile --stale`) run among the faults over old tickets, some with a draft waiting.
4. An auto-reviewer decides every waiting item (accept / edit / response at most once per
   thread / ignore; notify items are ignored), deterministic per item id, except while a
   conversation step holds the ticket.
5. While that runs: SIGKILL each of the six services once (the supervisor restarts them),
   SIGKILL nats-server once (the supervisor restarts it on the same store), make the LLM answer
   503 for a while, make the channel answer 503 for a while. With `--cluster` the broker is a
   three-node JetStream cluster with R3 streams, and the node killed is the one leading the
   events stream at that moment. With `--postgres` every service keeps its state in a fresh
   database on a real PostgreSQL server (DESK_DATABASE_URL), and one more fault is an outage of
   it: every connection terminated, new ones refused for a few seconds, nothing restarted.
6. Waits until quiescent (or the deadline), prints one PASS/FAIL line per invariant (the
   conversation ones from chaos/rounds.py) and exits 0 only if all hold. The stack is always
   stopped (SIGINT to the supervisor).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import datetime as dt
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from desk.helpdesk import create as create_ticket
from desk.helpdesk import ensure_demo
from shared import catalog
from shared.source.events import ticket_event

from . import conversations, postgres, rounds, stale
from .channel import ThreadedChannel
from .state import OPEN, Run, log
from .webhooks import post_event

SERVICES = tuple(s.name for s in catalog.SERVICES if s.supervised)  # what `desk up` starts
SETTLE_SECONDS = 6.0  # quiescent = nothing changed for this long
MISSING_GRACE = 30.0  # ...or this long, if some ticket never got an item


# -- the workload plan ------------------------------------------------------------------------


@dataclass
class Op:
    kind: str  # "first" (create ticket + send), "older" (pair's older event), "missing",
    #            "dup" (re-send op `ref`), "silent" (create ticket, no webhook)
    slot: int = -1  # ticket slot for first / older / silent
    ref: Op | None = None  # the op a dup re-sends
    lawyer: bool = False


def plan(events: int, rng: random.Random) -> list[Op]:
    n_dup = round(0.20 * events)
    n_missing = max(1, round(0.05 * events))
    n_pairs = max(1, round(0.05 * events))
    n_silent = max(1, round(0.05 * events))
    unique = events - n_dup
    n_single = unique - n_missing - 2 * n_pairs
    if n_single < 1:
        raise SystemExit("--events is too small for the workload mix (use at least 20)")
    slot = 0
    base: list[Op] = []
    for _ in range(n_single):
        base.append(Op("first", slot, lawyer=rng.random() < 0.05))
        slot += 1
    pair_slots = []
    for _ in range(n_pairs):
        base.append(Op("first", slot))
        pair_slots.append(slot)
        slot += 1
    for i in range(n_missing):
        base.append(Op("missing", 99000 + i))
    rng.shuffle(base)
    # each pair's older event goes somewhere after its newer one
    for pslot in pair_slots:
        at = next(i for i, op in enumerate(base) if op.kind == "first" and op.slot == pslot)
        base.insert(rng.randint(at + 1, len(base)), Op("older", pslot))
    ops = list(base)
    # duplicates: re-send an earlier send (same event id), at a random later position
    for _ in range(n_dup):
        sends = [i for i, op in enumerate(ops) if op.kind in ("first", "older", "missing")]
        ref_pos = rng.choice(sends)
        ops.insert(rng.randint(ref_pos + 1, len(ops)), Op("dup", ref=ops[ref_pos]))
    # silent tickets (no webhook) at random points
    for _ in range(n_silent):
        ops.insert(rng.randint(0, len(ops)), Op("silent", slot))
        slot += 1
    return ops


# -- process helpers --------------------------------------------------------------------------


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


async def stream_leader(admin_url: str, stream: str) -> str | None:
    from shared.bus import Bus

    bus = await Bus.connect(admin_url, service="chaos", reconnect=False)
    try:
        info = await bus.js.stream_info(stream)
        return info.cluster.leader if info.cluster else None
    finally:
        await bus.close()


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


# -- the stack --------------------------------------------------------------------------------


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
            raise RuntimeError(f"desk up exited with {stack.returncode}; see {var}/desk-up.log")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the stack did not start in 60s; see {var}/desk-up.log")
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


def tear_down(
    stack: subprocess.Popen[bytes] | None,
    channel: ThreadedChannel,
    llm: Any,
    var: Path,
    *,
    keep: bool,
) -> None:
    """Stop the stack and the fakes; remove the var dir unless its logs should be kept."""
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


# -- workload ---------------------------------------------------------------------------------


def workload(run: Run, ops: list[Op], rng: random.Random, steps: dict[int, str]) -> None:
    """Send the plan; a ticket with a conversation step (`steps`, slot → step) is handed to
    chaos/conversations.py just before its first event goes out."""
    sent: dict[int, dict[str, Any]] = {}  # id(op) -> the event it sent
    tickets: dict[int, Any] = {}  # slot -> Ticket
    pace = max(0.0, 20.0 / max(len(ops), 1))  # spread a small run over ~20 s of faults
    with httpx.Client(timeout=10) as client:
        for i, op in enumerate(ops):
            if run.stop.is_set():
                break
            started = time.monotonic()
            if op.kind == "silent":
                t = _create(run, op, rng)
                run.silent_tickets.add(t.id)
                continue
            if op.kind == "first":
                t = _create(run, op, rng)
                tickets[op.slot] = t
                run.webhook_tickets.add(t.id)
                if op.slot in steps:
                    conversations.planned(run, t.id, steps[op.slot])
                event = ticket_event(
                    "ticket.created",
                    t.id,
                    event_id=f"evt_chaos_{run.seed}_{i}",
                    updated_at=t.updated_at,
                    priority="normal",
                )
            elif op.kind == "older":
                t = tickets[op.slot]
                run.pair_tickets.add(t.id)
                # the same ticket again, with an older version, after the newer one
                event = ticket_event(
                    "ticket.created",
                    t.id,
                    event_id=f"evt_chaos_{run.seed}_{i}_older",
                    updated_at=t.updated_at - dt.timedelta(seconds=60),
                    priority="normal",
                )
            elif op.kind == "missing":
                tid = f"T{op.slot}"
                run.missing_tickets.add(tid)
                event = ticket_event(
                    "ticket.created", tid, event_id=f"evt_chaos_{run.seed}_{i}", priority="normal"
                )
            else:  # dup
                assert op.ref is not None
                if id(op.ref) not in sent:
                    continue  # its original was never accepted (stopped)
                event = sent[id(op.ref)]
            duplicate = post_event(run, client, event)
            if duplicate is None:
                continue
            with run.lock:
                run.sends += 1
                if op.kind == "dup":
                    run.planned_dups += 1
                    if duplicate:
                        run.dup_answers += 1
                    else:
                        run.dup_wrong.append(str(event["id"]))
                else:
                    sent[id(op)] = event
                    if duplicate:
                        run.first_dup += 1
            spent = time.monotonic() - started
            if pace > spent:
                time.sleep(pace - spent)
    run.sending_done.set()
    log(f"workload sent: {run.sends} accepted sends, {run.http_attempts} HTTP attempts")


def _create(run: Run, op: Op, rng: random.Random) -> Any:
    subject = rng.choice(
        ["Where is my refund?", "Invoice needs my VAT number", "Cannot log in", "Order late"]
    )
    body = "Hello, could you please help me with this? Thanks."
    if op.lawyer:
        subject = "Complaint"
        body = "If this is not fixed I will talk to my lawyer."
    while True:
        try:
            ticket = create_ticket(
                run.helpdesk_url, f"C{rng.randint(1, 9):03d}", subject, body, "normal"
            )
            break
        except Exception as exc:  # a locked SQLite file under load: try again
            log(f"creating a ticket failed ({exc.__class__.__name__}: {exc}); retrying")
            time.sleep(0.2)
    with run.lock:
        run.valid_tickets.add(ticket.id)
        if op.lawyer:
            run.lawyer_tickets.add(ticket.id)
    return ticket


# -- the auto-reviewer ------------------------------------------------------------------------


def reviewer(run: Run) -> None:
    """Decide every waiting item, page by page, except those of tickets a step holds."""
    headers = {"Authorization": f"Bearer {run.token}"}
    with httpx.Client(base_url=run.inbox, headers=headers, timeout=10) as client:
        while not run.stop.is_set():
            decided = 0
            cursor = None
            while not run.stop.is_set():
                params = {"status": "waiting", "limit": "200"}
                if cursor:
                    params["cursor"] = cursor
                try:
                    answer = client.get("/api/items", params=params)
                    page = answer.json() if answer.status_code == 200 else {}
                except (httpx.HTTPError, ValueError):
                    page = {}
                for item in page.get("items", []):
                    if run.stop.is_set():
                        break
                    if run.is_held(item.get("ticket_id")):
                        continue
                    decide(run, client, item)
                    decided += 1
                cursor = page.get("next_cursor")
                if not cursor:
                    break
            time.sleep(0.05 if decided else 0.3)


def decide(run: Run, client: httpx.Client, item: dict[str, Any]) -> None:
    rng = random.Random(f"{run.seed}/{item['id']}")
    action = (item.get("action_request") or {}).get("action")
    config = item.get("config") or {}
    thread = item["thread"]
    if action == "notify_supervisor" or not config.get("allow_accept", True):
        kind = "ignore"
    else:
        r = rng.random()
        kind = "accept" if r < 0.5 else "edit" if r < 0.7 else "response" if r < 0.85 else "ignore"
        if kind == "response" and (thread in run.responded or not config.get("allow_respond")):
            kind = "accept"
    body: dict[str, Any] = {"type": kind, "version": item["version"]}
    if kind == "edit":
        body["args"] = (
            f"Hello,\n\nThank you for your patience; we are on it (reviewed {item['id']}).\n\n"
            "Kind regards,\nSupport"
        )
    elif kind == "response":
        body["args"] = "Please mention that we answer within two working days."
    try:
        answer = client.post(f"/api/items/{item['id']}/decision", json=body)
    except httpx.HTTPError as exc:
        run.decision_errors[exc.__class__.__name__] += 1
        return
    with run.lock:  # the conversation steps accept some drafts themselves
        if answer.status_code == 202:
            run.decisions[kind] += 1
            if kind == "response":
                run.responded.add(thread)
        elif answer.status_code == 409:
            run.decision_conflicts += 1
        else:
            run.decision_errors[str(answer.status_code)] += 1
    if answer.status_code not in (202, 409):
        if answer.status_code not in (502, 503, 504):
            log(f"decision {kind} on {item['id']} got {answer.status_code}: {answer.text[:200]}")


# -- faults -----------------------------------------------------------------------------------


def injector(run: Run, llm: Any, channel: ThreadedChannel, seed: int) -> None:
    rng = random.Random(f"{seed}/faults")
    faults = [f"kill:{s}" for s in SERVICES] + ["kill:nats", "llm:503", "channel:503"]
    if run.database_url:
        faults.append("postgres:outage")
    rng.shuffle(faults)
    # start once the first events are in flight
    while run.sends < max(3, run.events // 10) and not run.sending_done.is_set():
        if run.stop.wait(0.2):
            return
    spread = max(1.0, run.events / 400)  # a big run spreads its faults over its longer life
    for done, fault in enumerate(faults):
        if done in stale.SCAN_AFTER:  # a stale scan between two faults; wait until it ran
            number = stale.SCAN_AFTER.index(done) + 1
            run.scans_wanted = number
            if not _wait(run, lambda number=number: run.scans_run >= number, 400):
                run.fault_problems.append(f"stale scan {number} did not run within 400s")
        if run.stop.wait(rng.uniform(1.0, 3.0) * spread):
            return
        kind, what = fault.split(":")
        if kind == "kill" and what == "nats":
            kill_broker(run)
        elif kind == "kill":
            pid = service_pid(run.var, what)
            if pid is None or not is_service(pid, what):
                run.fault_problems.append(f"{what}: no live pid to kill")
                continue
            os.kill(pid, signal.SIGKILL)
            run.faults.append(f"SIGKILL {what}({pid})")
            log(f"SIGKILL {what} pid {pid}")
            if not _wait(
                run, lambda pid=pid, what=what: (service_pid(run.var, what) or pid) != pid, 20
            ):
                run.fault_problems.append(f"{what} was not restarted within 20s")
        elif kind == "llm":
            times = rng.randint(4, 10)
            llm.fail_next(503, times=times)
            run.faults.append(f"LLM 503 x{times}")
            log(f"LLM answers 503 to the next {times} requests")
        elif kind == "postgres":
            database_outage(run, rng.uniform(3.0, 8.0))
        elif kind == "channel":
            seconds = rng.uniform(3.0, 6.0)
            channel.fail_for(seconds)
            run.faults.append(f"channel 503 for {seconds:.1f}s")
            log(f"channel answers 503 for {seconds:.1f}s")
    run.faults_done.set()


def kill_broker(run: Run) -> None:
    """SIGKILL the broker (in a cluster: the node leading the events stream) and see it back."""
    pids = nats_pids(run.var)
    name = next(iter(pids), None)
    if run.cluster:
        try:
            name = asyncio.run(stream_leader(run.admin_url, "EVENTS"))
        except Exception as exc:
            run.fault_problems.append(f"no events stream leader: {exc.__class__.__name__}")
            return
    pid = pids.get(name or "")
    if name is None or pid is None or not is_nats(pid):
        run.fault_problems.append(f"nats-server {name}: no live pid to kill")
        return
    os.kill(pid, signal.SIGKILL)
    what = f"nats-server {name}" + (" (events stream leader)" if run.cluster else "")
    run.faults.append(f"SIGKILL {what}({pid})")
    log(f"SIGKILL {what} pid {pid}")
    if not _wait(run, lambda: nats_pids(run.var).get(name, pid) != pid, 40):
        run.fault_problems.append(f"nats-server {name} was not restarted within 40s")


def database_outage(run: Run, seconds: float) -> None:
    """What a PostgreSQL restart or failover does: every connection terminated and new ones
    refused for `seconds`; no service is restarted."""
    assert run.database_url
    with postgres.outage(run.database_url) as swept:
        run.stop.wait(seconds)
    run.faults.append(f"PostgreSQL outage {seconds:.1f}s ({sum(swept)} connections terminated)")
    log(f"PostgreSQL refused connections for {seconds:.1f}s; {sum(swept)} terminated")
    if not sum(swept):
        run.fault_problems.append("the PostgreSQL outage found no connection to terminate")


def _wait(run: Run, check: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        if run.stop.wait(0.2):
            return False
    return False


# -- observation ------------------------------------------------------------------------------


def all_items(run: Run) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = None
    with httpx.Client(
        base_url=run.inbox, headers={"Authorization": f"Bearer {run.token}"}, timeout=10
    ) as client:
        while True:
            params = {"limit": "200"}
            if cursor:
                params["cursor"] = cursor
            answer = client.get("/api/items", params=params)
            answer.raise_for_status()
            page = answer.json()
            items += page["items"]
            cursor = page.get("next_cursor")
            if not cursor:
                return items


async def consumers(admin_url: str) -> dict[str, Any]:
    from shared.bus import Bus

    bus = await Bus.connect(admin_url, service="chaos", reconnect=False)
    try:
        found = {}
        for stream, durable in catalog.DURABLES:
            info = await bus.js.consumer_info(stream, durable)
            found[f"{stream}/{durable}"] = info
        return found
    finally:
        await bus.close()


async def redeliveries(admin_url: str) -> dict[str, int]:
    """Per consumer: deliveries (consumer sequence) minus the messages its filter matched.

    Every stream has limits retention and every durable exists before the first message, so
    after quiescence the difference is exactly how many deliveries were redeliveries.
    """
    from shared.bus import Bus

    bus = await Bus.connect(admin_url, service="chaos", reconnect=False)
    try:
        found = {}
        for stream, durable in catalog.DURABLES:
            info = await bus.js.consumer_info(stream, durable)
            filters = list(info.config.filter_subjects or []) or [info.config.filter_subject or ">"]
            matched = 0
            for subject in filters:
                sinfo = await bus.js.stream_info(stream, subjects_filter=subject)
                matched += sum((sinfo.state.subjects or {}).values())
            found[f"{stream}/{durable}"] = info.delivered.consumer_seq - matched
        return found
    finally:
        await bus.close()


async def replication(admin_url: str) -> dict[str, str]:
    """Per stream: its replica count and which peers are behind (empty when all are current)."""
    from shared.bus import Bus

    bus = await Bus.connect(admin_url, service="chaos", reconnect=False)
    try:
        found = {}
        for info in await bus.js.streams_info():
            peers = (info.cluster.replicas or []) if info.cluster else []
            behind = [p.name for p in peers if not p.current]
            found[info.config.name or "?"] = f"R{info.config.num_replicas}" + (
                f" behind:{behind}" if behind else ""
            )
        return found
    finally:
        await bus.close()


async def dead_letters(admin_url: str) -> list[Any]:
    from shared.bus import Bus
    from shared.deadletters import list_dead_letters

    bus = await Bus.connect(admin_url, service="chaos", reconnect=False)
    try:
        letters: list[Any] = []
        after = None
        while True:
            page = await list_dead_letters(bus.js, limit=100, after=after)
            letters += page
            if len(page) < 100:
                return letters
            after = page[-1].id
    finally:
        await bus.close()


async def results(admin_url: str) -> list[Any]:
    from services.reconciler.report import stored_since
    from shared import subjects
    from shared.bus import Bus

    bus = await Bus.connect(admin_url, service="chaos", reconnect=False)
    try:
        return await stored_since(bus, subjects.RESULTS, dt.datetime(2000, 1, 1, tzinfo=dt.UTC))
    finally:
        await bus.close()


def snapshot(run: Run, admin_url: str) -> tuple[bool, Any, bool]:
    """(quiescent now, a fingerprint of the state, every valid ticket has an item)."""
    items = all_items(run)
    statuses = Counter(i["status"] for i in items)
    infos = asyncio.run(consumers(admin_url))
    drained = all(
        (c.num_pending or 0) == 0 and (c.num_ack_pending or 0) == 0 for c in infos.values()
    )
    busy = sum(statuses.get(status, 0) for status in OPEN)
    with run.lock:
        valid = set(run.valid_tickets)
    seen = {i["ticket_id"] for i in items}
    fingerprint = (
        tuple(sorted(statuses.items())),
        tuple(sorted((k, c.delivered.stream_seq) for k, c in infos.items())),
    )
    return drained and busy == 0, fingerprint, valid <= seen


# -- the run ----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos", description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=2000, help="webhook sends (default 2000)")
    parser.add_argument("--seed", type=int, default=1, help="workload and fault seed")
    parser.add_argument("--deadline", type=float, default=1800, help="seconds before giving up")
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="a three-node JetStream cluster with R3 streams instead of one nats-server",
    )
    parser.add_argument(
        "--postgres",
        nargs="?",
        const=postgres.SERVER_URL,
        metavar="URL",
        help="keep every service's state in a fresh database on this PostgreSQL server "
        f"(default {postgres.SERVER_URL}) and add an outage of it to the faults",
    )
    parser.add_argument("--keep", action="store_true", help="keep the var dir even on success")
    args = parser.parse_args(argv)
    if args.postgres:
        why = postgres.answers(args.postgres)
        if why is not None:
            print(f"chaos: no PostgreSQL at {args.postgres}: {why}", file=sys.stderr)
            return 2
        with postgres.fresh_database(args.postgres, prefix="desk_chaos") as url:
            return _main(args, url)
    return _main(args, None)


def _main(args: argparse.Namespace, database_url: str | None) -> int:

    from tests.fakellm import FakeLLM  # the test suite's real OpenAI-compatible server

    started = time.monotonic()
    var = Path(tempfile.mkdtemp(prefix="desk-chaos-"))
    rng = random.Random(args.seed)
    ops = plan(args.events, rng)
    steps = conversations.assign(ops, args.seed)
    run = Run(
        args.seed, args.events, args.deadline, var, cluster=args.cluster, database_url=database_url
    )
    log(f"var dir {var}; {len(ops)} workload steps, seed {args.seed}")
    llm = FakeLLM().start()
    channel = ThreadedChannel().start()
    stack = None
    ok = False
    try:
        stack, state, creds = start_stack(
            var,
            llm.url,
            channel.url,
            3 if args.cluster else 1,
            {
                "DESK_STALE_DAYS": str(stale.STALE_DAYS),
                "DESK_STALE_CRON": stale.NEVER,
                **({"DESK_DATABASE_URL": database_url} if database_url else {}),
            },
        )
        run.ingress = state["services"]["ingress"]["url"]
        run.inbox = state["services"]["inbox_api"]["url"]
        run.secret = creds["webhook_secrets"]["helpdesk"]
        run.token = creds["reviewer_token"]
        run.helpdesk_url = f"sqlite:///{var.resolve() / 'helpdesk.sqlite'}"
        ensure_demo(run.helpdesk_url)
        admin_url = run.admin_url = state["nats_admin_url"]
        log(f"stack up (supervisor pid {stack.pid}) in {time.monotonic() - started:.1f}s")

        threads = [
            threading.Thread(target=workload, args=(run, ops, rng, steps), daemon=True),
            threading.Thread(target=reviewer, args=(run,), daemon=True),
            threading.Thread(target=conversations.conversations, args=(run,), daemon=True),
            threading.Thread(target=stale.scanner, args=(run,), daemon=True),
            threading.Thread(target=injector, args=(run, llm, channel, args.seed), daemon=True),
        ]
        for t in threads:
            t.start()

        quiescent = wait_quiescent(run, admin_url, started)
        run.stop.set()
        for t in threads:
            t.join(15)
        ok = report(run, admin_url, channel, quiescent, started)
    except Exception as exc:
        log(f"harness error: {exc.__class__.__name__}: {exc}")
        print(f"FAIL harness: {exc.__class__.__name__}: {exc}", flush=True)
    finally:
        run.stop.set()
        tear_down(stack, channel, llm, var, keep=args.keep or not ok)
    print("chaos: OK" if ok else "chaos: FAILED", flush=True)
    return 0 if ok else 1


def wait_quiescent(run: Run, admin_url: str, started: float) -> bool:
    last: Any = None
    since = time.monotonic()
    while time.monotonic() - started < run.deadline:
        time.sleep(1.0)
        if not all(
            e.is_set()
            for e in (
                run.sending_done,
                run.faults_done,
                run.conversations_done,
                run.scans_done,
            )
        ):
            try:  # a cheap look at redeliveries in flight
                infos = asyncio.run(consumers(admin_url))
                now = sum(c.num_redelivered or 0 for c in infos.values())
                run.peak_redelivered = max(run.peak_redelivered, now)
            except Exception:
                pass
            continue
        try:
            quiet, fingerprint, complete = snapshot(run, admin_url)
        except Exception as exc:  # the inbox API or NATS restarting: not quiet
            log(f"snapshot failed: {exc.__class__.__name__}: {exc}")
            last = None
            continue
        if fingerprint != last or not quiet:
            last, since = fingerprint, time.monotonic()
            continue
        stable = time.monotonic() - since
        if stable >= SETTLE_SECONDS and (complete or stable >= MISSING_GRACE):
            log(f"quiescent after {time.monotonic() - started:.0f}s")
            return True
    log("deadline passed before the system was quiescent")
    return False


def retried(var: Path, msg_id: str) -> bool:
    """Whether any service logged a retry (nak) of the message `msg_id` (prefix match)."""
    if not msg_id:
        return True
    for path in (var / "log").glob("*.log"):
        with open(path, errors="replace") as f:
            for line in f:
                if msg_id in line and "retrying" in line:
                    return True
    return False


TICKET_RE = re.compile(r"T\d{4,}")


def decision_times(run: Run) -> dict[str, dt.datetime]:
    """Item id → when it was decided, for the tickets a step closed or answered."""
    found: dict[str, dt.datetime] = {}
    tickets = {t.ticket for t in run.tasks if t.kind in conversations.ENDED}
    with httpx.Client(
        base_url=run.inbox, headers={"Authorization": f"Bearer {run.token}"}, timeout=10
    ) as client:
        for ticket in sorted(tickets):
            answer = client.get(f"/api/items/{ticket}~v1")
            if answer.status_code != 200:
                continue
            for d in answer.json().get("decisions", []):
                found[d["item_id"]] = dt.datetime.fromisoformat(d["decided_at"])
    return found


def report(
    run: Run, admin_url: str, channel: ThreadedChannel, quiescent: bool, started: float
) -> bool:
    from services.sender.store import outbox_rows
    from shared.db import database_url, make_engine

    lines: list[tuple[bool, str, str]] = []
    items = all_items(run)
    engine = make_engine(database_url(run.database_url, run.var, "sender"))
    try:
        rows = outbox_rows(engine)
    finally:
        engine.dispose()
    stored = rounds.results_of(asyncio.run(results(admin_url)))
    took = channel.keys()

    # 1-2. every valid ticket's items final; nothing left open
    lines.append(rounds.terminal(run, items))
    lines.append(rounds.open_items(run, items))
    # 3. outbox = accepted + edited; delivered rows = reply.sent = what the channel took
    lines.append(rounds.outbox(run, items, rows, stored, took, channel.refused))
    # 4-7. conversations: one reply per round, one ending per approved round, nothing sent
    # once withdrawn, every conversation step and stale scan did what it should
    lines.append(rounds.one_reply_per_round(stored))
    lines.append(rounds.approved_rounds(items, stored))
    lines.append(rounds.nothing_sent_withdrawn(run, items, rows, stored, took, decision_times(run)))
    lines.append(rounds.conversations(run, items, stored))
    lines.append(rounds.stale_scans(run, items))

    # 8. dead letters = exactly the nonexistent tickets, one attempt each
    letters = asyncio.run(dead_letters(admin_url))
    named: Counter[str] = Counter()
    other: list[str] = []
    attempts_bad: list[str] = []
    interrupted: list[str] = []
    for letter in letters:
        found = set(TICKET_RE.findall(letter.payload)) | set(TICKET_RE.findall(letter.error))
        hit = found & run.missing_tickets
        if len(hit) == 1:
            tid = hit.pop()
            named[tid] += 1
            if letter.attempts != 1:
                # a delivery cut short by a SIGKILL or a broker restart is redelivered without
                # any retry decision; only a logged retry of this message breaks the invariant
                if retried(run.var, letter.original_msg_id or ""):
                    attempts_bad.append(f"{tid}:{letter.attempts} (retried)")
                else:
                    interrupted.append(f"{tid}:{letter.attempts}")
        else:
            other.append(f"#{letter.id} {letter.service} {letter.reason}: {letter.error[:80]}")
    missing_no_letter = sorted(run.missing_tickets - set(named))
    twice = sorted(t for t, n in named.items() if n > 1)
    lines.append(
        (
            not other and not missing_no_letter and not twice and not attempts_bad,
            "dead letters",
            f"{len(letters)} dead letters for {len(run.missing_tickets)} nonexistent tickets; "
            f"without a letter {len(missing_no_letter)} {missing_no_letter[:5]}; more than one "
            f"{twice[:5]}; retried before the letter {attempts_bad[:5]}; redelivered after an "
            f"interrupted first delivery (no retry logged) {interrupted[:5]}; "
            f"other letters {len(other)}"
            f"{' ' + ' | '.join(other[:3]) if other else ''}",
        )
    )

    # 9. nothing pending in any consumer
    infos = asyncio.run(consumers(admin_url))
    pending = {
        k: (c.num_pending, c.num_ack_pending)
        for k, c in infos.items()
        if (c.num_pending or 0) or (c.num_ack_pending or 0)
    }
    try:
        per_consumer = asyncio.run(redeliveries(admin_url))
        redelivered = (
            f"{sum(per_consumer.values())} {dict((k, v) for k, v in per_consumer.items() if v)}"
        )
    except Exception as exc:
        redelivered = f"unknown ({exc.__class__.__name__}: {exc})"
    redelivered += f", peak num_redelivered seen {run.peak_redelivered}"
    lines.append(
        (
            not pending,
            "consumers drained",
            f"{len(infos)} consumers; with pending/ack-pending {pending or 'none'}; "
            f"quiescent before the deadline: {quiescent}",
        )
    )

    # 10. every re-sent event was answered duplicate:true
    lines.append(
        (
            run.planned_dups > 0 and not run.dup_wrong,
            "duplicates",
            f"{run.planned_dups} re-sent events, {run.dup_answers} answered duplicate:true, "
            f"{len(run.dup_wrong)} answered as new {run.dup_wrong[:5]}",
        )
    )

    # 11. every planned fault was injected and recovered from
    lines.append(
        (
            len(run.faults) == 9 + bool(run.database_url) and not run.fault_problems,
            "faults",
            f"{len(run.faults)} injected: {', '.join(run.faults)}"
            f"{'; problems: ' + '; '.join(run.fault_problems) if run.fault_problems else ''}",
        )
    )

    # 12. in a cluster: every stream kept three replicas and the restarted node caught up
    if run.cluster:
        deadline = time.monotonic() + 30  # a restarted peer may still be catching up
        streams = asyncio.run(replication(admin_url))
        while any(v != "R3" for v in streams.values()) and time.monotonic() < deadline:
            time.sleep(1.0)
            streams = asyncio.run(replication(admin_url))
        listed = ", ".join(f"{k} {v}" for k, v in sorted(streams.items()))
        lines.append(
            (
                bool(streams) and all(v == "R3" for v in streams.values()),
                "replicas",
                f"{len(streams)} streams: {listed}",
            )
        )

    for good, name, text in lines:
        print(f"{'PASS' if good else 'FAIL'} {name}: {text}", flush=True)
    print(
        f"INFO counts: events in {run.sends} ({run.conversation_sends} of them conversation and "
        f"stale-ticket webhooks; HTTP attempts {run.http_attempts}, refused or "
        f"unreachable {sum(run.send_errors.values())} {dict(run.send_errors)}); duplicates "
        f"dropped {run.dup_answers + run.first_dup} (planned {run.planned_dups}, retried sends "
        f"{run.first_dup}); redeliveries {redelivered}; decisions {dict(run.decisions)}, "
        f"409s {run.decision_conflicts}, errors {dict(run.decision_errors)}; faults "
        f"{len(run.faults)}; broker "
        f"{'a three-node cluster, R3 streams' if run.cluster else 'one nats-server'}; "
        f"database {'PostgreSQL' if run.database_url else 'SQLite'}; "
        f"wall time {time.monotonic() - started:.0f}s",
        flush=True,
    )
    return all(good for good, _, _ in lines)
