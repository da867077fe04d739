"""A whole run: the graph alone, then the phases on one stack; its report as JSON."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

from shared.helpdesk.sql import SqlSource

from ..processes import ROOT
from .phases import decisions_phase, latency_phase, session, throughput_phase
from .stack import Rig, log, replica, run_with_stack
from .tickets import FIRST_TICKET, add_tickets

DEFAULT_JSON = ROOT / "var" / "bench" / "pipeline.json"


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
