"""The inbox at a year's volume: listing, filtering, text search and a decision on N items.

Seeds N inbox items (default 1,000,000) spread over 365 days straight into a fresh inbox
database (SQLite under a temp dir, and a fresh schema of the PostgreSQL at
`postgresql://postgres@127.0.0.1:5432/test` when one answers), with what a year leaves: most
items sent, some ignored, superseded, withdrawn or failed, a few thousand waiting; six
categories, four queues, four priorities. Then it times, through the store functions the API
and the page call (`store.list_items`, `store.get_item`, `store.decide`), each query the
inbox answers, `--repeat` times with varying arguments, and prints p50/p99 against the 50 ms
target.

    python -m benchmarks.inbox [--items N] [--repeat R] [--databases sqlite,postgresql]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import insert
from sqlalchemy.engine import Engine

from services.inbox_api import store
from shared.db import database_url, make_engine

from .loadgen import percentile
from .processes import ROOT

DEFAULT_JSON = ROOT / "var" / "bench" / "inbox.json"
POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
TARGET_MS = 50.0
CATEGORIES = ("refund", "billing", "invoice", "bug", "account", "other")
QUEUES = ("general", "urgent", "billing", "email")
PRIORITIES = ("normal", "normal", "normal", "high", "low", "urgent")
STATUSES = (
    ["sent"] * 800
    + ["ignored"] * 80
    + ["superseded"] * 60
    + ["withdrawn"] * 35
    + ["failed"] * 5
    + ["waiting"] * 5
)  # per mille: about 5,000 of a million still wait
WORDS = (
    "refund charge invoice login password export crash upload order parcel address vat "
    "subscription cancel receipt discount sync calendar webhook account delete plan card"
).split()
REVIEWER = store.Reviewer("bench", "reviewer")


def log(text: str) -> None:
    print(f"[inbox {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def rows(count: int, start: int, now: dt.datetime, rng: random.Random) -> list[dict[str, Any]]:
    made = []
    for n in range(start, start + count):
        created = now - dt.timedelta(seconds=rng.uniform(0, 365 * 86400))
        status = rng.choice(STATUSES)
        if status == "waiting":  # what still waits is recent
            created = now - dt.timedelta(seconds=rng.uniform(0, 3 * 86400))
        thread = f"B{n:07d}"
        summary = " ".join(rng.choices(WORDS, k=4)).capitalize()
        made.append(
            {
                "id": f"{thread}~v1",
                "thread": thread,
                "version": 1,
                "status": status,
                "category": rng.choice(CATEGORIES),
                "ticket_id": thread,
                "summary": summary,
                "description": f"Ticket {thread} from a customer: {summary.lower()}",
                "action": "send_reply",
                "action_request": {"action": "send_reply", "args": {"reply": "Hello"}},
                "config": {"allow_accept": True, "allow_ignore": True},
                "trigger_source": "helpdesk",
                "trigger_type": "ticket.created",
                "trigger_event_id": f"helpdesk:{thread}",
                "cost": {},
                "warnings": [],
                "feedback": [],
                "created_at": created,
                "updated_at": created,
                "round": "r1",
                "priority": rng.choice(PRIORITIES),
                "queue": rng.choice(QUEUES),
                "customer": {"id": "C1", "name": "A Customer", "email": "a@example.com"},
                "waiting_since": created,
                "near_at": created + dt.timedelta(hours=18),
                "due_at": created + dt.timedelta(hours=24),
            }
        )
    return made


def seed(engine: Engine, items: int, seed_value: int = 7) -> float:
    """N items into a fresh inbox; seconds it took."""
    store.create_tables(engine)
    rng = random.Random(seed_value)
    now = dt.datetime.now(dt.UTC)
    started = time.monotonic()
    chunk = 20_000
    with engine.begin() as connection:
        for start in range(0, items, chunk):
            connection.execute(
                insert(store.ItemRow), rows(min(chunk, items - start), start, now, rng)
            )
    # the planner's statistics, as autovacuum (PostgreSQL) or `PRAGMA optimize` would have them
    with engine.begin() as connection:  # committed: PostgreSQL's statistics are transactional
        connection.exec_driver_sql(
            "ANALYZE inbox_items" if engine.dialect.name == "postgresql" else "ANALYZE"
        )
    return time.monotonic() - started


def timed(call: Callable[[int], Any], repeat: int) -> dict[str, float]:
    call(0)  # warm: the first call pays for the connection and the plan
    seconds = []
    for n in range(repeat):
        started = time.perf_counter()
        call(n)
        seconds.append(time.perf_counter() - started)
    ordered = sorted(seconds)
    return {
        "p50_ms": round(1000 * percentile(ordered, 50), 2),
        "p99_ms": round(1000 * percentile(ordered, 99), 2),
    }


def queries(engine: Engine, repeat: int) -> dict[str, dict[str, float]]:
    rng = random.Random(11)
    first, cursor = store.list_items(engine, status="sent", limit=50)
    deep = [cursor]
    for _ in range(20):  # a cursor twenty pages into the sent items
        _page, deep_cursor = store.list_items(engine, status="sent", cursor=deep[-1], limit=50)
        deep.append(deep_cursor)
    waiting, _ = store.list_items(engine, status="waiting", limit=200)
    to_decide = [i["id"] for i in waiting]
    known = [i["id"] for i in first]

    def decide(n: int) -> None:
        store.decide(engine, to_decide[n % len(to_decide)], "ignore", None, None, REVIEWER)

    cases: dict[str, Callable[[int], Any]] = {
        "list waiting (first page)": lambda n: store.list_items(engine, status="waiting"),
        "list every status, newest first": lambda n: store.list_items(engine, sort="newest"),
        "list sent, 20 pages in": lambda n: store.list_items(
            engine, status="sent", cursor=deep[-1]
        ),
        "filter waiting by category": lambda n: store.list_items(
            engine, status="waiting", category=CATEGORIES[n % 6]
        ),
        "filter waiting by queue": lambda n: store.list_items(
            engine, status="waiting", queue=QUEUES[n % 4]
        ),
        "filter sent by category": lambda n: store.list_items(
            engine, status="sent", category=CATEGORIES[n % 6]
        ),
        "filter every status by queue": lambda n: store.list_items(engine, queue=QUEUES[n % 4]),
        "sort waiting by priority": lambda n: store.list_items(
            engine, status="waiting", sort="priority"
        ),
        "text search, waiting": lambda n: store.list_items(
            engine, status="waiting", text=rng.choice(WORDS)
        ),
        "text search, every status": lambda n: store.list_items(engine, text=rng.choice(WORDS)),
        "text search, a ticket id": lambda n: store.list_items(
            engine, text=f"B{rng.randrange(0, 10_000):07d}"
        ),
        "one item": lambda n: store.get_item(engine, known[n % len(known)]),
        "a decision": decide,
    }
    return {
        name: timed(call, min(repeat, len(to_decide)) if name == "a decision" else repeat)
        for name, call in cases.items()
    }


def run_on(url: str, items: int, repeat: int) -> dict[str, Any]:
    engine = make_engine(url)
    try:
        log(f"{engine.dialect.name}: seeding {items:,} items")
        seeded = seed(engine, items)
        log(f"  seeded in {seeded:.0f} s; timing")
        timings = queries(engine, repeat)
    finally:
        engine.dispose()
    return {
        "database": engine.dialect.name,
        "items": items,
        "seed_seconds": round(seeded, 1),
        "queries": timings,
        "worst_p99_ms": max(t["p99_ms"] for t in timings.values()),
    }


def run(items: int, repeat: int, databases: tuple[str, ...]) -> dict[str, Any]:
    results = []
    with tempfile.TemporaryDirectory(prefix="desk-bench-inbox-") as tmp:
        if "sqlite" in databases:
            results.append(run_on(database_url(None, Path(tmp), "inbox"), items, repeat))
        if "postgresql" in databases:
            schema = postgres_schema()
            if schema is None:
                log("no PostgreSQL answers at 127.0.0.1:5432: its run is left out")
            else:
                try:
                    url = f"{POSTGRES_URL}?options=-csearch_path%3D{schema}"
                    results.append(run_on(url, items, repeat))
                finally:
                    drop_schema(schema)
    worst = max((r["worst_p99_ms"] for r in results), default=0.0)
    return {
        "cores": os.cpu_count(),
        "target_ms": TARGET_MS,
        "results": results,
        "headline": {"inbox_worst_p99_ms": worst},
    }


def postgres_schema() -> str | None:
    try:
        import psycopg

        with psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=3) as admin:
            schema = f"desk_bench_{uuid.uuid4().hex[:10]}"
            admin.execute(f"CREATE SCHEMA {schema}")
            return schema
    except Exception:
        return None


def drop_schema(schema: str) -> None:
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=3) as admin:
        admin.execute(f"DROP SCHEMA {schema} CASCADE")


def table(report: dict[str, Any]) -> str:
    results = report["results"]
    names = list(results[0]["queries"]) if results else []
    head = " | ".join(f"{r['database']} p50 / p99 ms" for r in results)
    lines = [
        f"inbox at {results[0]['items']:,} items ({report['cores']} cores; target p99 "
        f"{report['target_ms']:g} ms)"
        if results
        else "inbox: no database",
        f"| query | {head} |",
        "| --- |" + " ---: |" * len(results),
    ]
    for name in names:
        cells = []
        for r in results:
            t = r["queries"][name]
            miss = " (missed)" if t["p99_ms"] > report["target_ms"] else ""
            cells.append(f"{t['p50_ms']} / {t['p99_ms']}{miss}")
        lines.append(f"| {name} | {' | '.join(cells)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.inbox", description=__doc__)
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=100)
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    args = parser.parse_args(argv)
    databases = tuple(d.strip() for d in args.databases.split(",") if d.strip())
    report = run(args.items, args.repeat, databases)
    print(table(report))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
