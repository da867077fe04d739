"""Model-bound throughput: one drafter against an OpenAI-compatible endpoint that answers after
a fixed delay L, with C calls allowed in flight (DESK_LLM_CONCURRENCY).

The ceiling is C / L drafts per second (a model that takes L seconds a call, C calls at once);
the target is 0.9 of it. Each run gets a fresh nats-server (its default `sync_interval: always`)
and a fresh `desk drafter` with the SQLite checkpointer, and N = C * rounds mail work items
(each a conversation of its own, so nothing serializes them) published straight to
`work.drafter.email.received`; the rate is N over the time from the first publish to the N-th
`inbox.item` stored. The endpoint is `standins.llm.FakeLLM(delay=L)`, in this process.

    python -m benchmarks.model [--concurrency 8,32,64] [--delays 1,5] [--rounds 4] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from desk.natsserver import NatsServer
from desk.process import free_port
from shared import ids, subjects
from shared.bus import Bus
from shared.envelope import Envelope
from shared.streams import Topology, provision
from standins.llm import FakeLLM

from .processes import ROOT, Child, cpu_seconds
from .profile import Sampler, py_spy, top_frames

DEFAULT_JSON = ROOT / "var" / "bench" / "model.json"
TARGET = 0.9


def log(text: str) -> None:
    print(f"[model {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def mail(n: int, run: str) -> tuple[str, bytes, str]:
    """(subject, bytes, msg id) of one mail work item, as the router publishes it."""
    message_id = f"bench-{run}-{n}@mail.example"
    event_id = ids.ingress("email", message_id)
    data = {
        "MessageID": message_id,
        "From": f"Customer {n} <customer{n}@example.com>",
        "Subject": f"Question {n}",
        "TextBody": f"Hello, this is question number {n}. Where is my refund?",
    }
    envelope = Envelope(id=event_id, source="email", type="email.received", data=data)
    return (
        subjects.work("drafter", "email.received"),
        envelope.to_bytes(),
        ids.router(event_id, "drafter"),
    )


async def items_stored(bus: Bus) -> int:
    info = await bus.js.stream_info(subjects.INBOX)
    return int(info.state.messages)


async def drive(bus: Bus, events: int, ideal: float) -> float:
    """Publish `events` mails at once; seconds until the last draft is stored."""
    run = os.urandom(4).hex()
    started = time.monotonic()
    await asyncio.gather(
        *(
            bus.publish(subject, body, msg_id=msg_id)
            for subject, body, msg_id in (mail(n, run) for n in range(events))
        )
    )
    deadline = started + 60 + 4 * ideal
    while (stored := await items_stored(bus)) < events:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {stored} of {events} drafts after the deadline")
        await asyncio.sleep(0.02)
    return time.monotonic() - started


async def one_run(
    concurrency: int, delay: float, rounds: int, work: Path, profile: Path | None = None
) -> dict[str, Any]:
    events = concurrency * rounds
    nats = NatsServer(work / "nats", log_file=work / "nats.log")
    nats.start()
    drafter: Child | None = None
    try:
        with FakeLLM(delay=delay) as llm:
            bus = await Bus.connect(nats.url, service="bench")
            try:
                await provision(bus.js, Topology())
                ops = free_port()
                env = {k: v for k, v in os.environ.items() if not k.startswith("DESK_")}
                env.update(
                    {
                        "DESK_NATS_URL": nats.url,
                        "DESK_VAR_DIR": str(work / "var"),
                        "DESK_OPS_PORT": str(ops),
                        "DESK_LLM_BASE_URL": llm.url,
                        "DESK_LLM_API_KEY": "bench",
                        "DESK_LLM_CONCURRENCY": str(concurrency),
                        "DESK_LLM_TIMEOUT": str(max(30.0, 4 * delay)),
                        "DESK_LOG_LEVEL": "WARNING",
                    }
                )
                drafter = Child(["desk", "drafter"], env, work / "drafter.log")
                drafter.start(f"http://127.0.0.1:{ops}/readyz", timeout=60)
                cpu_before = cpu_seconds(drafter.pid)
                sampling = Sampler(drafter.pid, profile) if profile else contextlib.nullcontext()
                with sampling:
                    elapsed = await drive(bus, events, rounds * delay)
                cpu = cpu_seconds(drafter.pid) - cpu_before
            finally:
                await bus.close()
            most = llm.most_in_flight
    finally:
        if drafter is not None:
            drafter.stop()
        nats.kill()
    rate = events / elapsed
    ceiling = concurrency / delay
    return {
        "concurrency": concurrency,
        "delay_s": delay,
        "events": events,
        "seconds": round(elapsed, 2),
        "events_per_s": round(rate, 2),
        "ceiling_per_s": round(ceiling, 2),
        "ratio": round(rate / ceiling, 3),
        "most_in_flight": most,
        "drafter_cpu_ms_per_event": round(1000 * cpu / events, 1),
        "met": rate >= TARGET * ceiling,
    }


def run(
    concurrencies: tuple[int, ...] = (8, 32, 64),
    delays: tuple[float, ...] = (1.0, 5.0),
    rounds: int = 4,
    profile: Path | None = None,
) -> dict[str, Any]:
    """Every (C, L); with `profile`, the drafter of the largest C at the shortest L is sampled
    with py-spy (raw stacks written there, top frames in the report)."""
    rows = []
    profiled = (max(concurrencies), min(delays)) if profile and py_spy() else None
    frames: list[dict[str, object]] = []
    for delay in delays:
        for concurrency in concurrencies:
            with tempfile.TemporaryDirectory(prefix="desk-bench-model-") as tmp:
                log(f"C={concurrency} L={delay:g}s: {concurrency * rounds} drafts")
                sample = profile if (concurrency, delay) == profiled else None
                rows.append(asyncio.run(one_run(concurrency, delay, rounds, Path(tmp), sample)))
                if sample is not None:
                    frames = top_frames(sample, 20)
                log(f"  {rows[-1]['events_per_s']} drafts/s, {rows[-1]['ratio']} of C/L")
    worst = min(rows, key=lambda r: r["ratio"])
    return {
        "cores": os.cpu_count(),
        "target": TARGET,
        "rows": rows,
        "headline": {"model_bound/ceiling": worst["ratio"]},
        "profile": frames,
    }


def table(report: dict[str, Any]) -> str:
    lines = [
        f"model-bound drafter ({report['cores']} cores): drafts/s against C/L "
        f"(target {report['target']} of it)",
        "| C | L s | drafts | drafts/s | C/L | ratio | most in flight | drafter CPU ms/draft |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in report["rows"]:
        mark = "" if r["met"] else " (missed)"
        lines.append(
            f"| {r['concurrency']} | {r['delay_s']:g} | {r['events']} | {r['events_per_s']} | "
            f"{r['ceiling_per_s']:g} | {r['ratio']}{mark} | {r['most_in_flight']} | "
            f"{r['drafter_cpu_ms_per_event']} |"
        )
    return "\n".join(lines)


def _numbers(text: str, kind: type) -> tuple[Any, ...]:
    return tuple(kind(part) for part in text.split(",") if part.strip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.model", description=__doc__)
    parser.add_argument("--concurrency", default="8,32,64")
    parser.add_argument("--delays", default="1,5")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    parser.add_argument("--profile", type=Path, help="py-spy raw stacks of the largest C here")
    args = parser.parse_args(argv)
    report = run(
        _numbers(args.concurrency, int), _numbers(args.delays, float), args.rounds, args.profile
    )
    print(table(report))
    for frame in report["profile"]:
        print(f"  {frame['self_pct']:5}% self {frame['total_pct']:5}% total  {frame['frame']}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
