"""Pipeline throughput and latency on the whole stack, against the drafter's graph alone.

Starts the real system (`desk up`: embedded nats-server with its default `sync_interval: always`,
SQLite, the built-in offline draft model, the outbox channel), then:

1. **graph alone**: the drafter's compiled graph with the same SQLite checkpointer, run in this
   process from invoke to interrupt for M tickets in a row — the stage no design can skip, and
   the reference the pipeline's rate is compared with;
2. **latency**: L signed ticket webhooks offered at a steady rate (default 50/s, where the
   latency target is set), each timed from its 202 to the item visible in the inbox API;
3. **throughput**: N webhooks sent as fast as ingress takes them; events/s from the first 202 to
   the last item visible, with the same latency figures (here mostly queueing);
4. **decisions**: an `accept` for each of those N items through the API; decisions/s and
   latency from the decision's 202 to its `reply.sent` event;
5. per-stage throughput read from the broker's own timestamps (ingress → EVENTS, router →
   WORK, drafter → inbox.item, projection → visible in the API, API → inbox.decision, sender →
   reply.sent), naming the slowest stage; every process's CPU per event and per decision
   (the services, the broker, this load generator); and every service's memory.

    python -m benchmarks.pipeline [--events N] [--latency-events L] [--rate R] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from sqlmodel import Session

from chaos.harness.stack import SERVICES, launch_stack, stop_stack
from desk.process import free_port
from desk.webhook import signed_headers
from shared import subjects
from shared.bus import Bus
from shared.helpdesk.events import ticket_event
from shared.helpdesk.sql import SqlSource, TicketRow

from .loadgen import percentile
from .processes import ROOT, Child, cpu_seconds, rss_mib

DEFAULT_JSON = ROOT / "var" / "bench" / "pipeline.json"
FIRST_TICKET = 500_000  # bench tickets are T500000…, far from the demo helpdesk's


def log(text: str) -> None:
    print(f"[pipeline {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def figures(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    if not ordered:
        return {"p50_ms": 0.0, "p95_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}
    return {
        "p50_ms": round(percentile(ordered, 50) * 1000, 1),
        "p95_ms": round(percentile(ordered, 95) * 1000, 1),
        "p99_ms": round(percentile(ordered, 99) * 1000, 1),
        "max_ms": round(ordered[-1] * 1000, 1),
    }


# -- the helpdesk -----------------------------------------------------------------------------


def add_tickets(url: str, first: int, count: int) -> list[TicketRow]:
    """`count` open tickets T<first>… in one transaction (the demo customers own them)."""
    source = SqlSource(url)
    try:
        source.create_tables()
        source.seed_demo()
        now = dt.datetime.now(dt.UTC)
        rows = [
            TicketRow(
                id=f"T{first + i}",
                customer_id=f"C{1 + i % 9:03d}",
                subject="Where is my refund?",
                body="Hello, I returned the parcel two weeks ago. Could you check? Thanks.",
                status="open",
                priority="normal",
                created_at=now,
                updated_at=now,
            )
            for i in range(count)
        ]
        with Session(source.engine, expire_on_commit=False) as session:
            session.add_all(rows)
            session.commit()
        return rows
    finally:
        source.engine.dispose()


# -- the graph alone --------------------------------------------------------------------------


async def graph_alone(helpdesk_url: str, tickets: list[str], work_dir: Path) -> dict[str, Any]:
    """The drafter's graph, compiled once, from invoke to interrupt for each ticket in a row."""
    from langchain_core.runnables import RunnableConfig

    from services.drafter import (
        DURABILITY,
        Deps,
        OfflineDraftModel,
        Work,
        build_graph,
        sqlite_checkpoints,
    )

    source = SqlSource(helpdesk_url)
    deps = Deps(source=source, model=OfflineDraftModel())
    path = work_dir / "graph-alone-checkpoints.sqlite"
    with sqlite_checkpoints(str(path)) as saver:  # the drafter's own
        graph = build_graph().compile(checkpointer=saver)
        trigger = {"source": "helpdesk", "type": "ticket.created", "event_id": "bench"}
        started = time.perf_counter()
        for tid in tickets:
            work = Work(f"alone-{tid}", tid, None, trigger, None)
            config = RunnableConfig(configurable={"thread_id": work.thread})
            start: Any = work.start()
            await graph.ainvoke(start, config, context=deps, durability=DURABILITY)
        spent = time.perf_counter() - started
        last = RunnableConfig(configurable={"thread_id": f"alone-{tickets[-1]}"})
        state = await graph.aget_state(last)
    await source.close()
    if not state.interrupts:
        raise RuntimeError("the graph did not stop at the review interrupt")
    return {
        "events": len(tickets),
        "seconds": round(spent, 2),
        "events_per_s": round(len(tickets) / spent, 1),
        "ms_per_event": round(spent / len(tickets) * 1000, 2),
    }


# -- watching the inbox API -------------------------------------------------------------------


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


# -- sending ----------------------------------------------------------------------------------


def signed_requests(
    secret: str, tickets: list[TicketRow], tag: str
) -> list[tuple[str, bytes, dict[str, str]]]:
    prepared = []
    for i, t in enumerate(tickets):
        event = ticket_event(
            "ticket.created",
            t.id,
            event_id=f"evt_bench_{tag}_{i}",
            updated_at=t.updated_at,
            priority="normal",
        )
        body = json.dumps(event).encode()
        prepared.append((t.id, body, signed_headers("standard", secret, event, body)))
    return prepared


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


# -- broker timestamps ------------------------------------------------------------------------


async def stamps(bus: Bus, stream: str, subject: str, since: dt.datetime) -> list[float]:
    """Broker timestamps (epoch seconds) of the messages on `subject` stored after `since`."""
    sub = await bus.js.pull_subscribe(
        subject,
        stream=stream,
        config=ConsumerConfig(
            deliver_policy=DeliverPolicy.BY_START_TIME,
            opt_start_time=since,
            ack_policy=AckPolicy.NONE,
            inactive_threshold=30.0,
        ),
    )
    found: list[float] = []
    try:
        while True:
            try:
                batch = await sub.fetch(1000, timeout=1.0)
            except TimeoutError:
                break
            found += [m.metadata.timestamp.timestamp() for m in batch]
            if len(batch) < 1000 and (await sub.consumer_info()).num_pending == 0:
                break
    finally:
        await sub.unsubscribe()
    return sorted(found)


def stage_rate(times: list[float]) -> dict[str, Any]:
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    return {
        "messages": len(times),
        "per_s": round((len(times) - 1) / span, 1) if span > 0 else None,
    }


# -- the run ----------------------------------------------------------------------------------


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


def cpu_per(before: dict[str, float], after: dict[str, float], count: int) -> dict[str, float]:
    """Milliseconds of CPU per event (or decision) each process spent between two readings."""
    return {name: round((after[name] - before[name]) / count * 1000, 2) for name in before}


# How often the inbox API's list is read to see items arrive. Each read (20 newest items) costs
# the inbox API ~5 ms of CPU: read every 20 ms, that was 0.2 of a core and half of what the
# inbox API spent per event. A reviewer's browser reads it every few seconds. Latencies are
# measured from the first read that shows the item: at most the interval late.
LATENCY_POLL = 0.05
STRAGGLER_WAIT = 2.0  # seconds without a new item before the whole waiting list is read
THROUGHPUT_POLL = 0.25

STACK_SETTINGS = {
    "DESK_RECONCILE_INTERVAL": "86400",  # bench tickets arrive by webhook only
    "DESK_CHANNEL_RATE": "100000",  # the outbox channel: no external rate limit to respect
    "DESK_CHANNEL_BURST": "1000",
    "DESK_LOG_LEVEL": "WARNING",
}


@dataclass
class Phases:
    """What the phases share: HTTP clients for ingress and the inbox API, the admin bus."""

    rig: Rig
    ingress: httpx.AsyncClient
    inbox: httpx.AsyncClient
    bus: Bus
    watch: Watch

    @property
    def secret(self) -> str:
        return str(self.rig.creds["webhook_secrets"]["helpdesk"])


@contextlib.asynccontextmanager
async def session(rig: Rig) -> AsyncIterator[Phases]:
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    headers = {"Authorization": f"Bearer {rig.creds['reviewer_token']}"}
    async with (
        httpx.AsyncClient(base_url=rig.ingress, limits=limits, timeout=30) as ingress,
        httpx.AsyncClient(base_url=rig.inbox, headers=headers, limits=limits, timeout=30) as inbox,
    ):
        bus = await Bus.connect(rig.admin_url, service="bench", reconnect=False)
        try:
            yield Phases(rig, ingress, inbox, bus, Watch(inbox))
        finally:
            await bus.close()


async def latency_phase(s: Phases, tickets: list[TicketRow], rate: float) -> dict[str, Any]:
    """Events offered at a steady `rate`; each timed from its 202 to its item visible."""
    requests = signed_requests(s.secret, tickets, "lat")
    log(f"latency: {len(tickets)} events at {rate:.0f}/s")
    wanted = {t.id for t in tickets}
    watcher = asyncio.create_task(
        s.watch.until(wanted, time.perf_counter() + 120 + len(tickets), LATENCY_POLL)
    )
    accepted = await send_all(s.ingress, requests, rate=rate)
    await watcher
    lat = [s.watch.seen[t] - accepted[t] for t in wanted]
    report = {"events": len(tickets), "offered_per_s": rate, **figures(lat)}
    log(f"latency: p99 {report['p99_ms']} ms")
    return report


async def throughput_phase(s: Phases, tickets: list[TicketRow]) -> dict[str, Any]:
    """Every event as fast as ingress takes it; events/s from the first 202 to the last item
    visible, and per-stage rates from the broker's timestamps."""
    requests = signed_requests(s.secret, tickets, "thr")
    since = dt.datetime.now(dt.UTC)
    log(f"throughput: {len(tickets)} events as fast as ingress takes them")
    wanted = {t.id for t in tickets}
    watcher = asyncio.create_task(
        s.watch.until(wanted, time.perf_counter() + 60 + len(tickets), THROUGHPUT_POLL)
    )
    cpu_before = s.rig.cpu()
    accepted = await send_all(s.ingress, requests, rate=None)
    await watcher
    cpu = cpu_per(cpu_before, s.rig.cpu(), len(tickets))
    first = min(accepted.values())
    last = max(s.watch.seen[t] for t in wanted)
    lat = [s.watch.seen[t] - accepted[t] for t in wanted]
    report: dict[str, Any] = {
        "events": len(tickets),
        "seconds": round(last - first, 2),
        "events_per_s": round(len(tickets) / (last - first), 1),
        "intake_seconds": round(max(accepted.values()) - first, 2),
        **figures(lat),
        "cpu_ms_per_event": cpu,
    }
    log(f"throughput: {report['events_per_s']} events/s")
    bus = s.bus
    report["stages"] = {
        "ingress": stage_rate(await stamps(bus, subjects.EVENTS, subjects.events_of(), since)),
        "router": stage_rate(await stamps(bus, subjects.WORK, subjects.work_for("drafter"), since)),
        "drafter": stage_rate(await stamps(bus, subjects.INBOX, subjects.INBOX_ITEM, since)),
        "inbox projection": stage_rate(sorted(s.watch.seen[t] for t in wanted)),
    }
    return report


async def decisions_phase(s: Phases, tickets: set[str]) -> dict[str, Any]:
    """An accept for each of these tickets' items; decisions/s and latency to `reply.sent`."""
    items = await waiting_items(s.inbox, tickets)
    since = dt.datetime.now(dt.UTC)
    log(f"decisions: {len(items)} accepts")
    sent_at: dict[str, float] = {}

    async def on_sent(msg: Any) -> None:
        with contextlib.suppress(ValueError, KeyError):
            sent_at.setdefault(json.loads(msg.data)["subject"], time.perf_counter())

    sub = await s.bus.nc.subscribe(subjects.result("reply.sent"), cb=on_sent)
    try:
        cpu_before = s.rig.cpu()
        decided = await decide_all(s.inbox, items)
        deadline = time.perf_counter() + 60 + len(items) / 5
        while not decided.keys() <= sent_at.keys():
            if time.perf_counter() > deadline:
                raise RuntimeError(f"{len(decided.keys() - sent_at.keys())} replies never sent")
            await asyncio.sleep(0.05)
        cpu = cpu_per(cpu_before, s.rig.cpu(), len(items))
    finally:
        await sub.unsubscribe()
    first = min(decided.values())
    last = max(sent_at[t] for t in decided)
    lat = [sent_at[t] - decided[t] for t in decided]
    report: dict[str, Any] = {
        "decisions": len(items),
        "seconds": round(last - first, 2),
        "decisions_per_s": round(len(items) / (last - first), 1),
        **figures(lat),
        "cpu_ms_per_decision": cpu,
    }
    log(f"decisions: {report['decisions_per_s']} decisions/s")
    report["stages"] = {
        "inbox api decisions": stage_rate(
            await stamps(s.bus, subjects.INBOX, subjects.INBOX_DECISION, since)
        ),
        "sender": stage_rate(
            await stamps(s.bus, subjects.RESULTS, subjects.result("reply.sent"), since)
        ),
    }
    return report


async def measure(
    rig: Rig, events: int, latency_events: int, rate: float, drafters: int = 1
) -> dict[str, Any]:
    extra = [replica(rig, "drafter", i) for i in range(2, drafters + 1)]
    try:
        return await _measure(rig, events, latency_events, rate)
    finally:
        for child in extra:
            child.stop()


async def _measure(rig: Rig, events: int, latency_events: int, rate: float) -> dict[str, Any]:
    lat_tickets = add_tickets(rig.helpdesk_url, FIRST_TICKET, latency_events)
    thr_tickets = add_tickets(rig.helpdesk_url, FIRST_TICKET + latency_events, events)
    report: dict[str, Any] = {}
    alone = [t.id for t in thr_tickets[: min(500, events)]]
    log(f"graph alone: {len(alone)} tickets")
    report["graph_alone"] = await graph_alone(rig.helpdesk_url, alone, rig.var)
    log(f"graph alone: {report['graph_alone']['events_per_s']} events/s")
    report["memory_mib_start"] = rig.memory()
    async with session(rig) as s:
        report["latency"] = await latency_phase(s, lat_tickets, rate)
        report["throughput"] = await throughput_phase(s, thr_tickets)
        report["memory_mib_after_events"] = rig.memory()
        report["decisions"] = await decisions_phase(s, {t.id for t in thr_tickets})
        report["memory_mib_end"] = rig.memory()
        report["api_polls"] = s.watch.polls
    stages = {**report["throughput"].pop("stages"), **report["decisions"].pop("stages")}
    report["stages"] = stages
    rated = {k: v["per_s"] for k, v in stages.items() if v["per_s"]}
    report["slowest_stage"] = min(rated, key=lambda k: rated[k]) if rated else None
    return report


async def throughput_only(rig: Rig, events: int) -> dict[str, Any]:
    """The throughput phase alone on a fresh stack (the cost curve's pipeline points)."""
    tickets = add_tickets(rig.helpdesk_url, FIRST_TICKET, events)
    async with session(rig) as s:
        report = await throughput_phase(s, tickets)
    report["memory_mib_end"] = rig.memory()
    return report


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


def run(
    events: int = 2000,
    latency_events: int = 300,
    rate: float = 50.0,
    json_path: Path | None = DEFAULT_JSON,
    keep: bool = False,
    drafters: int = 1,
) -> dict[str, Any]:
    started = time.monotonic()
    report: dict[str, Any] = {
        "machine": {"cores": os.cpu_count(), "python": platform.python_version()},
        "settings": {
            "events": events,
            "latency_events": latency_events,
            "rate": rate,
            "drafters": drafters,
        },
    }
    report.update(
        run_with_stack(lambda rig: measure(rig, events, latency_events, rate, drafters), keep=keep)
    )
    alone = report["graph_alone"]["events_per_s"]
    report["pipeline_vs_graph"] = round(report["throughput"]["events_per_s"] / alone, 2)
    report["wall_seconds"] = round(time.monotonic() - started, 1)
    if json_path:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(report, indent=2))
    return report


def table(report: dict[str, Any]) -> str:
    t, lat, d, g = (
        report["throughput"],
        report["latency"],
        report["decisions"],
        report["graph_alone"],
    )
    rows = [
        f"pipeline on {report['machine']['cores']} cores (offline draft model, SQLite, "
        f"sync_interval: always, {report['settings'].get('drafters', 1)} drafter process(es))",
        f"  {'graph alone':<28} {g['events_per_s']:>8} events/s  ({g['ms_per_event']} ms/event)",
        f"  {'events → visible':<28} {t['events_per_s']:>8} events/s  "
        f"p50 {t['p50_ms']} p95 {t['p95_ms']} p99 {t['p99_ms']} ms  "
        f"= {report['pipeline_vs_graph']:.0%} of the graph alone",
        f"  {'at ' + str(int(lat['offered_per_s'])) + '/s offered':<28} {'':>8}           "
        f"p50 {lat['p50_ms']} p95 {lat['p95_ms']} p99 {lat['p99_ms']} ms",
        f"  {'decisions → reply.sent':<28} {d['decisions_per_s']:>8} decisions/s  "
        f"p50 {d['p50_ms']} p95 {d['p95_ms']} p99 {d['p99_ms']} ms",
        "  stages (outputs per second):",
    ]
    for name, stage in report["stages"].items():
        mark = "  ← slowest" if name == report["slowest_stage"] else ""
        rows.append(f"    {name:<26} {stage['per_s']!s:>8}/s{mark}")
    events, decisions = t["cpu_ms_per_event"], d["cpu_ms_per_decision"]
    rows.append("  CPU ms per event (webhook → visible) / per decision (accept → reply.sent):")
    for name in events:
        rows.append(f"    {name:<26} {events[name]:>8.2f} / {decisions[name]:.2f}")
    rows.append(
        f"    {'all':<26} {sum(events.values()):>8.2f} / {sum(decisions.values()):.2f}"
        f"  (of {report['machine']['cores']} cores: "
        f"{report['machine']['cores'] * 1000 / sum(events.values()):.0f} events/s at most)"
    )
    rows.append("  memory (MiB RSS) start → after events → end:")
    for name in SERVICES:
        rows.append(
            f"    {name:<26} {report['memory_mib_start'][name]} → "
            f"{report['memory_mib_after_events'][name]} → {report['memory_mib_end'][name]}"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pipeline", description=__doc__)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--latency-events", type=int, default=300)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument(
        "--drafters", type=int, default=1, help="drafter processes sharing its consumers"
    )
    args = parser.parse_args(argv)
    report = run(args.events, args.latency_events, args.rate, args.json, args.keep, args.drafters)
    print(table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
