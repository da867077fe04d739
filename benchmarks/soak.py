"""Bounded state: a long run of the whole stack, disk and memory sampled as it goes.

Starts the real system (`desk up`, SQLite, the offline model) with a short thread retention
(`--retention` seconds instead of 30 days, the prune pass every 10 s), then sends waves of
signed ticket webhooks for new tickets, accepts every draft through the inbox API, waits for
each `reply.sent`, and after each wave records: the checkpoint threads the drafter holds, the
size of each database file and of the broker's store, and every service's resident memory.

Past the retention horizon the checkpoints stop growing (finished threads are deleted as fast
as new ones finish, and SQLite reuses the freed pages); what the archive period keeps (365 days:
inbox items, outbox rows, ledger keys, stream messages) grows with the events, and is reported
as bytes per event.

    python -m benchmarks.soak [--events 100000] [--wave 1000] [--retention 60] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from .pipeline import (
    FIRST_TICKET,
    THROUGHPUT_POLL,
    Rig,
    add_tickets,
    decisions_phase,
    run_with_stack,
    send_all,
    session,
    signed_requests,
    waiting_items,
)
from .processes import ROOT

DEFAULT_JSON = ROOT / "var" / "bench" / "soak.json"
MIB = 1024 * 1024


def log(text: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def size_mib(path: Path) -> float:
    """A file with its -wal and -shm, or a directory's files, MiB."""
    if path.is_dir():
        total = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    else:
        total = sum(
            p.stat().st_size for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists()
        )
    return round(total / MIB, 2)


def threads_held(var: Path) -> int:
    path = var / "drafter-checkpoints.sqlite"
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)) as db:
        return int(db.execute("SELECT count(DISTINCT thread_id) FROM checkpoints").fetchone()[0])


def sample(rig: Rig, events: int, started: float) -> dict[str, Any]:
    var = rig.var
    files = {p.name: size_mib(p) for p in sorted(var.glob("*.sqlite"))}
    store = next((p for p in (var / "nats", var / "jetstream") if p.exists()), var)
    return {
        "events": events,
        "seconds": round(time.monotonic() - started, 1),
        "threads_held": threads_held(var),
        "files_mib": files,
        "broker_store_mib": size_mib(store) if store != var else None,
        "memory_mib": rig.memory(),
    }


async def soak(rig: Rig, events: int, wave: int) -> dict[str, Any]:
    samples: list[dict[str, Any]] = []
    started = time.monotonic()
    done = 0
    async with session(rig) as s:
        while done < events:
            n = min(wave, events - done)
            tickets = add_tickets(rig.helpdesk_url, FIRST_TICKET + done, n)
            wanted = {t.id for t in tickets}
            watcher = asyncio.create_task(
                s.watch.until(wanted, time.perf_counter() + 120 + n, THROUGHPUT_POLL)
            )
            await send_all(s.ingress, signed_requests(s.secret, tickets, f"soak{done}"), rate=None)
            await watcher
            await decisions_phase(s, wanted)  # every draft accepted, every reply sent
            done += n
            samples.append(sample(rig, done, started))
            last = samples[-1]
            # every figure of the wave, so a soak cut short still tells what it saw
            memory = " ".join(f"{k} {v}" for k, v in last["memory_mib"].items())
            log(
                f"{done} events: {last['threads_held']} threads held, "
                f"checkpoints {last['files_mib'].get('drafter-checkpoints.sqlite')} MiB, "
                f"inbox {last['files_mib'].get('inbox.sqlite')} MiB, "
                f"broker {last['broker_store_mib']} MiB; RSS MiB: {memory}"
            )
        left = await waiting_items(s.inbox, set())
    return {"samples": samples, "left_waiting": len(left)}


def growth(samples: list[dict[str, Any]], pick: Any) -> float | None:
    """Bytes per event between the second sample and the last (past the start-up)."""
    if len(samples) < 3:
        return None
    first, last = samples[1], samples[-1]
    a, b = pick(first), pick(last)
    if a is None or b is None:
        return None
    return round((b - a) * MIB / (last["events"] - first["events"]), 1)


def run(
    events: int = 100_000,
    wave: int = 1000,
    retention: float = 60.0,
    json_path: Path | None = DEFAULT_JSON,
) -> dict[str, Any]:
    started = time.monotonic()
    settings = {
        "DESK_THREAD_RETENTION_DAYS": str(retention / 86400),
        "DESK_PRUNE_INTERVAL": "10",
    }
    report: dict[str, Any] = {
        "machine": {"cores": os.cpu_count(), "python": platform.python_version()},
        "settings": {"events": events, "wave": wave, "retention_seconds": retention},
    }
    report.update(run_with_stack(lambda rig: soak(rig, events, wave), settings))
    samples = report["samples"]
    report["bytes_per_event"] = {
        name: growth(samples, lambda s, n=name: s["files_mib"].get(n))
        for name in samples[-1]["files_mib"]
    }
    report["bytes_per_event"]["broker store"] = growth(samples, lambda s: s["broker_store_mib"])
    report["wall_seconds"] = round(time.monotonic() - started, 1)
    if json_path:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(report, indent=2))
    return report


def table(report: dict[str, Any]) -> str:
    samples = report["samples"]
    names = list(samples[-1]["files_mib"])
    services = list(samples[-1]["memory_mib"])
    head = ["events", "s", "threads"] + [n.removesuffix(".sqlite") for n in names] + ["broker"]
    head += [f"{s} RSS" for s in services]
    lines = ["| " + " | ".join(head) + " |", "|" + " ---: |" * len(head)]
    for s in samples:
        row = [str(s["events"]), str(s["seconds"]), str(s["threads_held"])]
        row += [str(s["files_mib"].get(n, "")) for n in names]
        row += [str(s["broker_store_mib"])]
        row += [str(s["memory_mib"].get(n)) for n in services]
        lines.append("| " + " | ".join(row) + " |")
    per_event = ", ".join(f"{k} {v}" for k, v in report["bytes_per_event"].items() if v is not None)
    lines.append(f"\nbytes per event (second sample to last): {per_event}")
    lines.append(f"left waiting: {report['left_waiting']}; wall {report['wall_seconds']} s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.soak", description=__doc__)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--wave", type=int, default=1000)
    parser.add_argument("--retention", type=float, default=60.0, help="seconds")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    args = parser.parse_args(argv)
    print(table(run(args.events, args.wave, args.retention, args.json)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
