"""Measuring one mode: a warm-up, the interleaved rounds of every measure, the exactly-once
check, and latency without queueing (the open loop)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from typing import Any

import nats

from benchmarks.bare import PUBLISH_PREFIX
from shared import subjects

from ..loadgen import LoadGenerator, LoadResult
from ..processes import ROOT, rss_mib
from ..profile import Sampler, top_frames
from .broker import (
    BENCH_STREAM,
    BROKER_IN_FLIGHT,
    PUBLISH_STREAM,
    SAME_STREAM,
    bench_stream,
    publish_all,
    renamed,
    stream_messages,
)
from .mode import Mode
from .tally import Tally
from .workload import Workload, make_workload, slices

WORK_DIR = ROOT / "var" / "bench" / "ingress"
RESEND = 1000
ROUNDS = 10

OFFERED_SHARE = 0.5  # the open-loop rate, as a share of what ingress sustained closed-loop
OFFERED_SECONDS = 4.0
_OFFERED_KEYS = ("completed", "errors", "statuses", "p50_ms", "p95_ms", "p99_ms", "max_ms")

MEASURES = ("bare", "publish", "ingress", "broker", "broker_same")  # rotating order each round
HTTP_MEASURES = ("bare", "publish", "ingress")


async def _measure(
    mode: Mode,
    warm: Workload,
    main: Workload,
    extra: Workload,
    rounds: int,
    profile: bool,
    say: Callable[[str], None],
) -> dict[str, Any]:
    count = len(main.requests)
    nc = await nats.connect(mode.server.url)
    gen = LoadGenerator({"warm": warm.requests, "main": main.requests, "extra": extra.requests})
    try:
        js = nc.jetstream(timeout=30, publish_async_max_pending=mode.in_flight)
        same_js = nc.jetstream(timeout=30, publish_async_max_pending=mode.connections)
        await js.add_stream(bench_stream())
        await js.add_stream(bench_stream(SAME_STREAM, "same"))
        await js.add_stream(bench_stream(PUBLISH_STREAM, PUBLISH_PREFIX))
        same = renamed(main.messages, "same")
        say("warm-up")
        for name in HTTP_MEASURES:
            port = mode.http_child(name)[1]
            await asyncio.to_thread(gen.run, port, "warm", connections=mode.connections)
        await publish_all(js, warm.messages)
        for stream in (subjects.EVENTS, BENCH_STREAM, PUBLISH_STREAM):
            await js.purge_stream(stream)

        tallies = {name: Tally() for name in MEASURES}
        memory = [rss_mib(mode.ingress.pid)]  # after the warm-up, then after all the rounds
        sampler = Sampler(mode.ingress.pid, mode.work / "ingress-profile.txt") if profile else None
        with sampler or contextlib.nullcontext():
            for r, (lo, hi) in enumerate(slices(count, rounds)):
                say(f"round {r + 1}/{rounds}: requests {lo:,}–{hi:,}")
                at = r % len(MEASURES)
                for name in MEASURES[at:] + MEASURES[:at]:
                    if name == "broker":
                        await mode.broker_round(js, tallies[name], main.messages[lo:hi])
                    elif name == "broker_same":
                        await mode.broker_round(same_js, tallies[name], same[lo:hi])
                    else:
                        child, port = mode.http_child(name)
                        await mode.http_round(gen, tallies[name], child, port, lo, hi)

        memory.append(rss_mib(mode.ingress.pid))
        say("exactly-once check")
        stored = await stream_messages(js, subjects.EVENTS)
        resent = min(RESEND, count)
        again = await asyncio.to_thread(
            gen.run,
            mode.ingress_port,
            "main",
            0,
            resent,
            connections=mode.connections,
            keep_bodies=True,
        )
        stored_after = await stream_messages(js, subjects.EVENTS)
        broker_stored = await stream_messages(js, BENCH_STREAM)
        publish_stored = await stream_messages(js, PUBLISH_STREAM)
        for stream in (BENCH_STREAM, SAME_STREAM, PUBLISH_STREAM):
            await js.delete_stream(stream)

        # Latency without queueing: both at the same fixed rate, half what ingress sustained.
        rate = OFFERED_SHARE * LoadResult.merge(tallies["ingress"].results).rps
        size = min(len(extra.requests), max(mode.connections, round(rate * OFFERED_SECONDS)))
        say(f"open loop: {size:,} requests at {rate:,.0f}/s to bare, then to ingress")
        offered: dict[str, Any] = {
            "share_of_ingress_rps": OFFERED_SHARE,
            "rate": round(rate),
            "requests": size,
        }
        for name, port in (("bare", mode.bare_port), ("ingress", mode.ingress_port)):
            result = await asyncio.to_thread(
                gen.run, port, "extra", 0, size, connections=mode.connections, rate=rate
            )
            offered[name] = {k: v for k, v in result.summary().items() if k in _OFFERED_KEYS}
    finally:
        gen.close()
        await nc.close()

    answers = [json.loads(b) for b in again.bodies or [] if b]
    bare, ingress = tallies["bare"].http(), tallies["ingress"].http()
    publish = tallies["publish"].http()
    publish["stream_messages"] = publish_stored
    broker = tallies["broker"].broker(mode.in_flight)
    broker["stream_messages"] = broker_stored
    broker_same = tallies["broker_same"].broker(mode.connections)
    ingress["rss_mib"] = memory
    if sampler is not None:
        ingress["profile"] = {
            "file": str(sampler.output),
            "top_self": top_frames(sampler.output, 15, "self"),
            "top_total": top_frames(sampler.output, 30, "total"),
        }
    exactly_once: dict[str, Any] = {
        "expected": count,
        "answered_202": ingress["statuses"].get("202", 0),
        "stream_after_run": stored,
        "resent": resent,
        "resent_202": again.statuses.get(202, 0),
        "resent_duplicate": sum(1 for a in answers if a.get("duplicate") is True),
        "stream_after_resend": stored_after,
    }
    exactly_once["ok"] = (
        exactly_once["answered_202"] == count
        and stored == count
        and exactly_once["resent_duplicate"] == resent
        and stored_after == stored
    )
    return {
        "sync_always": mode.mode == "always",
        "bare": bare,
        "publish": publish,
        "broker": broker,
        "broker_same_in_flight": broker_same,
        "ingress": ingress,
        "exactly_once": exactly_once,
        "offered": offered,
        "ratios": {
            "ingress/publish": round(ingress["rps"] / publish["rps"], 3),
            "ingress/bare": round(ingress["rps"] / bare["rps"], 3),
            "ingress/broker": round(ingress["rps"] / broker["rps"], 3),
            "ingress/broker_same_in_flight": round(ingress["rps"] / broker_same["rps"], 3),
        },
    }


def measure_mode(
    mode: str,
    count: int,
    connections: int = 64,
    rounds: int = ROUNDS,
    broker_in_flight: int = BROKER_IN_FLIGHT,
    profile: bool = False,
    echo: bool = True,
) -> dict[str, Any]:
    """Bare, broker and ingress on a fresh nats-server in `mode` ("relaxed" or "always")."""
    work = WORK_DIR / mode
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)

    def say(text: str) -> None:
        if echo:
            print(
                f"[ingress {mode} {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True
            )

    say(f"signing {count:,} requests")
    tag = f"{mode}{os.urandom(3).hex()}"
    setup = Mode(mode, connections, broker_in_flight, work)
    warm = make_workload(min(2000, max(connections * 4, count // 10)), setup.secret, f"{tag}w")
    main = make_workload(count, setup.secret, tag)
    extra = make_workload(max(connections, count // 4), setup.secret, f"{tag}x")
    try:
        setup.start()
        return asyncio.run(_measure(setup, warm, main, extra, rounds, profile, say))
    finally:
        setup.stop()
