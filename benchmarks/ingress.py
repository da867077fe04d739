"""Ingress throughput against two ceilings measured in the same run (issue #10, part 1).

For each durability mode of the broker (`relaxed`: NATS's default lazy fsync; `always`:
`sync_interval: always`, every message fsynced before its ack) this starts a fresh nats-server
with a file store and measures, with the same pre-generated requests, generator and connections:

- **bare**: a Starlette endpoint that reads the body and answers 202, served the way ingress is
  (`benchmarks.bare`, one process like ingress): the HTTP ceiling on this machine;
- **publish**: the same endpoint doing the work ingress cannot avoid: it publishes each body with
  nats-py (its `webhook-id` as `Nats-Msg-Id`) and answers once the PubAck is back: the ceiling
  for an endpoint that stores what it accepts, and the one ingress is held to (ingress/publish);
- **broker**: one nats-py client publishing the same messages (same headers, `Nats-Msg-Id`)
  with many publishes in flight to a stream configured like EVENTS: the broker ceiling;
- **broker, as many in flight as connections**: the same client with no more publishes in
  flight than ingress can have (one per connection: each request waits for its PubAck). With
  `sync_interval: always` the broker's rate depends on that number (it syncs what is pending
  together), so this is the ceiling for ingress at that concurrency;
- **ingress**: the real service (`python -m desk ingress`) verifying each signature and
  answering 202 after the PubAck; then exactly-once: the stream holds N messages, and 1,000
  of the requests sent again answer `duplicate: true` and store nothing.

The machine is shared, so the four are interleaved: the N requests are cut into `rounds`
slices, and each round measures all four on its slice (in a rotating order).
A burst of load from elsewhere then hits all four alike, and the ratios hold.

    python -m benchmarks.ingress [--requests N] [--connections 64] [--json PATH]

`run(...)` returns the dict it writes as JSON; its `headline` holds the figures `make bench`
prints (ingress figures from the relaxed mode, `synced/broker` from the sync-always mode).
The targets: ingress/publish ≥ 0.80 and sync-always ingress/broker ≥ 0.90; ingress/bare is a
figure (what storing costs at all), not a target.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import dataclasses
import datetime as dt
import itertools
import json
import os
import platform
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
from nats.js import JetStreamContext
from nats.js.api import StreamConfig

from benchmarks.bare import PUBLISH_PREFIX
from desk.natsserver import NatsServer
from desk.process import free_port
from desk.webhook import signed_headers
from services.ingress import nats_headers
from shared import headers as h
from shared import ids, subjects
from shared.helpdesk.events import ticket_event
from shared.streams import Topology

from .loadgen import LoadGenerator, LoadResult, encode_post
from .processes import ROOT, Child, cpu_seconds, rss_mib
from .profile import Sampler, top_frames

SOURCE = "helpdesk"
EVENT_TYPE = "ticket.created"
MODES = ("relaxed", "always")
DEFAULT_JSON = ROOT / "var" / "bench" / "ingress.json"
WORK_DIR = ROOT / "var" / "bench" / "ingress"
RESEND = 1000
ROUNDS = 10
BROKER_IN_FLIGHT = 4000  # nats-py's own default window for publish_async
BENCH_STREAM = "BENCH_EVENTS"
PUBLISH_STREAM = "BENCH_PUBLISHED"  # what the publishing endpoint stores (benchmarks.bare)
SAME_STREAM = "BENCH_SAME_IN_FLIGHT"  # the second broker reference: its own stream and ids
WORKERS = 1  # ingress runs one process (one uvicorn server); bare runs the same

OFFERED_SHARE = 0.5  # the open-loop rate, as a share of what ingress sustained closed-loop
OFFERED_SECONDS = 4.0
_OFFERED_KEYS = ("completed", "errors", "statuses", "p50_ms", "p95_ms", "p99_ms", "max_ms")

# issue "Performance at the limits", target 3
TARGETS = {"ingress/publish": 0.80, "ingress_p99_ms": 25.0, "synced/broker": 0.90}
MEASURES = ("bare", "publish", "ingress", "broker", "broker_same")  # rotating order each round
HTTP_MEASURES = ("bare", "publish", "ingress")


@dataclass(frozen=True)
class Message:
    subject: str
    body: bytes
    headers: dict[str, str]  # what ingress stores, `Nats-Msg-Id` included


@dataclass(frozen=True)
class Workload:
    requests: list[bytes]  # encoded HTTP/1.1 requests, signed
    messages: list[Message]  # the same events as ingress publishes them


def make_workload(count: int, secret: str, tag: str) -> Workload:
    """`count` distinct signed ticket events, each as a request and as the message it becomes."""
    requests: list[bytes] = []
    messages: list[Message] = []
    received = dt.datetime.now(dt.UTC)
    for i in range(count):
        event_id = f"evt_{tag}_{i:06d}"
        event = ticket_event(EVENT_TYPE, f"T{1001 + i % 41}", event_id=event_id, priority="normal")
        body = json.dumps(event).encode()
        headers = signed_headers("standard", secret, event, body)
        requests.append(encode_post(f"/webhooks/{SOURCE}", body, headers))
        msg_id = ids.ingress(SOURCE, event_id)
        stored = nats_headers(
            [("host", "127.0.0.1"), *headers.items()],
            SOURCE,
            event_id,
            EVENT_TYPE,
            msg_id,
            received,
        )
        stored[h.MSG_ID] = msg_id
        messages.append(Message(f"bench.{SOURCE}.{EVENT_TYPE}", body, stored))
    return Workload(requests, messages)


def new_secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(32)).decode()


def slices(count: int, rounds: int) -> list[tuple[int, int]]:
    """`count` cut into `rounds` consecutive, nearly equal slices."""
    rounds = max(1, min(rounds, count))
    edges = [count * r // rounds for r in range(rounds + 1)]
    return list(itertools.pairwise(edges))


# -- one durability mode ---------------------------------------------------------------------------


@dataclass
class _Tally:
    """What one measure accumulates over the rounds."""

    results: list[LoadResult] = dataclasses.field(default_factory=list)
    server_cpu: float = 0.0
    nats_cpu: float = 0.0
    published: int = 0  # broker: messages and their time, client CPU
    elapsed: float = 0.0
    client_cpu: float = 0.0
    rounds_rps: list[float] = dataclasses.field(default_factory=list)

    def http(self) -> dict[str, Any]:
        merged = LoadResult.merge(self.results)
        figures = merged.summary()
        per = 1e6 / max(1, merged.completed)
        figures["server_cpu_s"] = round(self.server_cpu, 3)
        figures["server_cpu_us_per_request"] = round(self.server_cpu * per, 1)
        figures["nats_cpu_s"] = round(self.nats_cpu, 3)
        figures["nats_cpu_us_per_request"] = round(self.nats_cpu * per, 1)
        figures["rounds_rps"] = [round(r.rps) for r in self.results]
        return figures

    def broker(self, in_flight: int) -> dict[str, Any]:
        per = 1e6 / max(1, self.published)
        return {
            "messages": self.published,
            "in_flight": in_flight,
            "elapsed_s": round(self.elapsed, 3),
            "rps": round(self.published / self.elapsed, 1) if self.elapsed else 0.0,
            "client_cpu_s": round(self.client_cpu, 3),
            "client_cpu_us_per_message": round(self.client_cpu * per, 1),
            "nats_cpu_s": round(self.nats_cpu, 3),
            "nats_cpu_us_per_message": round(self.nats_cpu * per, 1),
            "rounds_rps": [round(r) for r in self.rounds_rps],
        }


def _bench_stream(name: str = BENCH_STREAM, prefix: str = "bench") -> StreamConfig:
    """EVENTS' configuration under another name and subject space."""
    [events] = [s for s in Topology().streams() if s.name == subjects.EVENTS]
    return dataclasses.replace(events, name=name, subjects=[f"{prefix}.>"])


def _renamed(messages: list[Message], prefix: str) -> list[Message]:
    """The same messages on `prefix.…` subjects (for the second broker reference's stream)."""
    return [
        dataclasses.replace(m, subject=prefix + m.subject[m.subject.index(".") :]) for m in messages
    ]


async def _publish_all(js: JetStreamContext, messages: list[Message]) -> list[Any]:
    futures = [await js.publish_async(m.subject, m.body, headers=dict(m.headers)) for m in messages]
    return list(await asyncio.gather(*futures))


async def _messages(js: JetStreamContext, stream: str) -> int:
    return int((await js.stream_info(stream)).state.messages)


class _Mode:
    """A nats-server in one durability mode, with bare, ingress and a broker client on it."""

    def __init__(self, mode: str, connections: int, in_flight: int, work: Path) -> None:
        self.mode = mode
        self.connections = connections
        self.in_flight = in_flight
        self.work = work
        self.secret = new_secret()
        self.server = NatsServer(
            work / "nats", sync_always=mode == "always", log_file=work / "nats.log"
        )
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("DESK_")}
        self.env["PYTHONUNBUFFERED"] = "1"  # as `desk up` runs its services
        self.bare_port, self.bare_ops_port = free_port(), free_port()
        self.publish_port, self.publish_ops_port = free_port(), free_port()
        self.ingress_port, self.ingress_ops_port = free_port(), free_port()
        self.bare = Child(
            [
                "benchmarks.bare",
                "--port",
                str(self.bare_port),
                "--ops-port",
                str(self.bare_ops_port),
            ],
            self.env,
            work / "bare.log",
        )
        self.publish = Child(
            [
                "benchmarks.bare",
                "--port",
                str(self.publish_port),
                "--ops-port",
                str(self.publish_ops_port),
                "--nats-url",
                self.server.url,
            ],
            self.env,
            work / "publish.log",
        )
        self.ingress = Child(["desk", "ingress"], self._ingress_env(), work / "ingress.log")

    def _ingress_env(self) -> dict[str, str]:
        return {
            **self.env,
            "DESK_NATS_URL": self.server.url,
            "DESK_HTTP_HOST": "127.0.0.1",
            "DESK_HTTP_PORT": str(self.ingress_port),
            "DESK_OPS_PORT": str(self.ingress_ops_port),
            "DESK_VAR_DIR": str(self.work),
            "DESK_PROVISION": "true",
            # An hour of tolerance: the requests are signed before a run that may take minutes.
            "DESK_SOURCES": json.dumps(
                {SOURCE: {"scheme": "standard", "secrets": [self.secret], "tolerance": 3600}}
            ),
        }

    def start(self) -> None:
        self.server.start()
        self.bare.start(f"http://127.0.0.1:{self.bare_ops_port}/healthz")
        self.publish.start(f"http://127.0.0.1:{self.publish_ops_port}/healthz")
        self.ingress.start(f"http://127.0.0.1:{self.ingress_ops_port}/readyz")

    def stop(self) -> None:
        self.ingress.stop()
        self.publish.stop()
        self.bare.stop()

    def http_child(self, name: str) -> tuple[Child, int]:
        return {
            "bare": (self.bare, self.bare_port),
            "publish": (self.publish, self.publish_port),
            "ingress": (self.ingress, self.ingress_port),
        }[name]
        self.server.stop()

    @property
    def nats_pid(self) -> int:
        assert self.server.proc is not None
        return self.server.proc.pid

    async def http_round(
        self, gen: LoadGenerator, tally: _Tally, child: Child, port: int, lo: int, hi: int
    ) -> None:
        before = cpu_seconds(child.pid), cpu_seconds(self.nats_pid)
        result = await asyncio.to_thread(
            gen.run, port, "main", lo, hi, connections=self.connections
        )
        tally.server_cpu += cpu_seconds(child.pid) - before[0]
        tally.nats_cpu += cpu_seconds(self.nats_pid) - before[1]
        tally.results.append(result)

    async def broker_round(self, js: JetStreamContext, tally: _Tally, batch: list[Message]) -> None:
        nats_before, cpu_before = cpu_seconds(self.nats_pid), time.process_time()
        started = time.perf_counter()
        await _publish_all(js, batch)
        elapsed = time.perf_counter() - started
        tally.elapsed += elapsed
        tally.rounds_rps.append(len(batch) / elapsed)
        tally.client_cpu += time.process_time() - cpu_before
        tally.nats_cpu += cpu_seconds(self.nats_pid) - nats_before
        tally.published += len(batch)


async def _measure(
    mode: _Mode,
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
        await js.add_stream(_bench_stream())
        await js.add_stream(_bench_stream(SAME_STREAM, "same"))
        await js.add_stream(_bench_stream(PUBLISH_STREAM, PUBLISH_PREFIX))
        same = _renamed(main.messages, "same")
        say("warm-up")
        for name in HTTP_MEASURES:
            port = mode.http_child(name)[1]
            await asyncio.to_thread(gen.run, port, "warm", connections=mode.connections)
        await _publish_all(js, warm.messages)
        for stream in (subjects.EVENTS, BENCH_STREAM, PUBLISH_STREAM):
            await js.purge_stream(stream)

        tallies = {name: _Tally() for name in MEASURES}
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
        stored = await _messages(js, subjects.EVENTS)
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
        stored_after = await _messages(js, subjects.EVENTS)
        broker_stored = await _messages(js, BENCH_STREAM)
        publish_stored = await _messages(js, PUBLISH_STREAM)
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
    setup = _Mode(mode, connections, broker_in_flight, work)
    warm = make_workload(min(2000, max(connections * 4, count // 10)), setup.secret, f"{tag}w")
    main = make_workload(count, setup.secret, tag)
    extra = make_workload(max(connections, count // 4), setup.secret, f"{tag}x")
    try:
        setup.start()
        return asyncio.run(_measure(setup, warm, main, extra, rounds, profile, say))
    finally:
        setup.stop()


# -- the report ------------------------------------------------------------------------------------


def headline(modes: dict[str, Any]) -> dict[str, Any]:
    """`ingress/publish`, `ingress/bare`, `ingress_rps`, `ingress_p99_ms` (relaxed),
    `synced/broker` and `synced/same_in_flight` (always)."""
    line: dict[str, Any] = {}
    if "relaxed" in modes:
        relaxed = modes["relaxed"]
        line["ingress/publish"] = round(relaxed["ratios"]["ingress/publish"], 2)
        line["ingress/bare"] = round(relaxed["ratios"]["ingress/bare"], 2)
        line["ingress_rps"] = round(relaxed["ingress"]["rps"])
        line["ingress_p99_ms"] = round(relaxed["ingress"]["p99_ms"], 1)
    if "always" in modes:
        ratios = modes["always"]["ratios"]
        line["synced/broker"] = round(ratios["ingress/broker"], 2)
        line["synced/same_in_flight"] = round(ratios["ingress/broker_same_in_flight"], 2)
    return line


def headline_text(line: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in line.items())


def targets(modes: dict[str, Any]) -> dict[str, bool]:
    met: dict[str, bool] = {}
    if "relaxed" in modes:
        relaxed = modes["relaxed"]
        met[f"relaxed ingress/publish >= {TARGETS['ingress/publish']:.2f}"] = (
            relaxed["ratios"]["ingress/publish"] >= TARGETS["ingress/publish"]
        )
        met[f"relaxed ingress p99 <= {TARGETS['ingress_p99_ms']:.0f} ms"] = (
            relaxed["ingress"]["p99_ms"] <= TARGETS["ingress_p99_ms"]
        )
    if "always" in modes:
        met[f"sync-always ingress/broker >= {TARGETS['synced/broker']:.2f}"] = (
            modes["always"]["ratios"]["ingress/broker"] >= TARGETS["synced/broker"]
        )
    for mode, figures in modes.items():
        met[f"{mode} exactly once"] = bool(figures["exactly_once"]["ok"])
    return met


def table(report: dict[str, Any]) -> str:
    cfg, machine = report["config"], report["machine"]
    rows = [
        f"Ingress: {cfg['requests']:,} signed webhooks over {cfg['connections']} keep-alive "
        f"connections, {cfg['workers']} worker, {cfg['rounds']} interleaved rounds; "
        f"{machine['cores']} cores, load {machine['loadavg_start']} → {machine['loadavg_end']}",
        f"{'mode':<8} {'measure':<8} {'req/s':>8} {'p50 ms':>7} {'p95 ms':>7} {'p99 ms':>7} "
        f"{'server µs/req':>13} {'nats µs/req':>11}",
    ]
    for mode, m in report["modes"].items():
        for name in HTTP_MEASURES:
            f = m[name]
            nats_us = f"{f['nats_cpu_us_per_request']:>11.0f}" if name != "bare" else f"{'':>11}"
            rows.append(
                f"{mode:<8} {name:<8} {f['rps']:>8,.0f} {f['p50_ms']:>7.2f} {f['p95_ms']:>7.2f} "
                f"{f['p99_ms']:>7.2f} {f['server_cpu_us_per_request']:>13.0f} {nats_us}"
            )
        for b in (m["broker"], m["broker_same_in_flight"]):
            rows.append(
                f"{mode:<8} {'broker':<8} {b['rps']:>8,.0f} {'':>7} {'':>7} {'':>7} "
                f"{b['client_cpu_us_per_message']:>13.0f} {b['nats_cpu_us_per_message']:>11.0f}"
                f"  (one nats-py client, {b['in_flight']} in flight)"
            )
        o = m["offered"]
        rows.append(
            f"{mode:<8} at {o['rate']:,}/s offered (open loop, half of ingress's rate): "
            + "; ".join(
                f"{name} p50/p95/p99 {o[name]['p50_ms']:.1f}/{o[name]['p95_ms']:.1f}/"
                f"{o[name]['p99_ms']:.1f} ms"
                for name in ("bare", "ingress")
            )
        )
        e = m["exactly_once"]
        rows.append(
            f"{mode:<8} ingress/publish={m['ratios']['ingress/publish']:.2f} "
            f"ingress/bare={m['ratios']['ingress/bare']:.2f} "
            f"ingress/broker={m['ratios']['ingress/broker']:.2f} (same in flight: "
            f"{m['ratios']['ingress/broker_same_in_flight']:.2f}); exactly once: "
            f"{e['stream_after_run']:,}/{e['expected']:,} stored, {e['resent']:,} resent → "
            f"{e['resent_duplicate']:,} duplicate, {e['stream_after_resend']:,} stored "
            f"{'ok' if e['ok'] else 'FAILED'}; ingress memory "
            f"{' → '.join(str(v) for v in m['ingress'].get('rss_mib', []))} MiB"
        )
    rows.append(
        "targets: "
        + ", ".join(f"{k} {'met' if v else 'MISSED'}" for k, v in report["targets"].items())
    )
    rows.append(headline_text(report["headline"]))
    return "\n".join(rows)


def run(
    requests: int = 20_000,
    connections: int = 64,
    json_path: Path | None = DEFAULT_JSON,
    modes: tuple[str, ...] = MODES,
    rounds: int = ROUNDS,
    broker_in_flight: int = BROKER_IN_FLIGHT,
    profile: bool = False,
    echo: bool = True,
) -> dict[str, Any]:
    """Measure every mode, print the table (when `echo`), write JSON; return the report."""
    started = time.monotonic()
    report: dict[str, Any] = {
        "benchmark": "ingress",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "loadavg_start": round(os.getloadavg()[0], 2),
        },
        "config": {
            "requests": requests,
            "connections": connections,
            "workers": WORKERS,
            "rounds": rounds,
            "broker_in_flight": broker_in_flight,
            "resend": RESEND,
        },
        "modes": {},
    }
    for mode in modes:
        report["modes"][mode] = measure_mode(
            mode, requests, connections, rounds, broker_in_flight, profile, echo
        )
    report["headline"] = headline(report["modes"])
    report["targets"] = targets(report["modes"])
    report["machine"]["loadavg_end"] = round(os.getloadavg()[0], 2)
    report["wall_s"] = round(time.monotonic() - started, 1)
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(report, indent=2) + "\n")
    if echo:
        print(table(report))
        if json_path is not None:
            print(f"written {json_path} ({report['wall_s']} s)")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Ingress throughput against its ceilings.")
    parser.add_argument("--requests", type=int, default=20_000, help="distinct webhooks (20000)")
    parser.add_argument("--connections", type=int, default=64, help="keep-alive connections")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write JSON")
    parser.add_argument("--mode", choices=MODES, action="append", help="only this mode")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="interleaved rounds (10)")
    parser.add_argument(
        "--broker-in-flight", type=int, default=BROKER_IN_FLIGHT, help="broker reference window"
    )
    parser.add_argument(
        "--profile", action="store_true", help="sample ingress with py-spy (when installed)"
    )
    args = parser.parse_args(argv)
    report = run(
        args.requests,
        args.connections,
        args.json,
        tuple(args.mode or MODES),
        args.rounds,
        args.broker_in_flight,
        args.profile,
    )
    # Exit 1 only when exactly-once fails: a missed speed target is a finding, not a crash.
    return 0 if all(m["exactly_once"]["ok"] for m in report["modes"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
