"""The inbox at a year's volume: listing, filtering, text search and a decision on N items.

Seeds N inbox items (default 1,000,000) spread over 365 days straight into a fresh inbox
database (SQLite under a temp dir, and a fresh schema of the PostgreSQL at
`postgresql://postgres@127.0.0.1:5432/test` when one answers), with what a year leaves: most
items sent, some ignored, superseded, withdrawn or failed, a few thousand waiting; six
categories, four queues, four priorities. A real `desk inbox_api` on that database (and a
nats-server of its own) then answers each query of its API, `--repeat` times with varying
arguments over one keep-alive connection: p50/p99 of the answers against the 50 ms target.

The rows go in as the inbox_api's own first start laid out its tables (read back from the
database: nothing of the service is imported); its second start indexes them for search.

    python -m benchmarks.inbox [--items N] [--repeat R] [--databases sqlite,postgresql]
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import random
import secrets
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import MetaData, Table, insert
from sqlalchemy.engine import Engine

from desk.natsserver import NatsServer
from desk.process import free_port
from shared.db import database_url, make_engine

from .loadgen import percentile
from .processes import ROOT, Child

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
TOKEN = "bench-reviewer-token"


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
    """N items into the inbox_items table the service made; seconds it took."""
    table = Table("inbox_items", MetaData(), autoload_with=engine)
    rng = random.Random(seed_value)
    now = dt.datetime.now(dt.UTC)
    started = time.monotonic()
    chunk = 20_000
    with engine.begin() as connection:
        for start in range(0, items, chunk):
            connection.execute(insert(table), rows(min(chunk, items - start), start, now, rng))
    return time.monotonic() - started


def analyze(url: str) -> None:
    """The planner's statistics, as autovacuum (PostgreSQL) or `PRAGMA optimize` would have
    them for a year-old table (committed: PostgreSQL's statistics are transactional)."""
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            connection.exec_driver_sql(
                "ANALYZE inbox_items" if engine.dialect.name == "postgresql" else "ANALYZE"
            )
    finally:
        engine.dispose()


def drop_search_index(engine: Engine) -> None:
    """The search index goes before the rows do: the next start builds it from all of them."""
    with engine.begin() as connection:
        if engine.dialect.name == "sqlite":
            connection.exec_driver_sql("DROP TABLE IF EXISTS inbox_search")
        else:
            connection.exec_driver_sql("DROP INDEX IF EXISTS ix_inbox_items_search_trgm")


class Inbox:
    """A `desk inbox_api` on `url`, with a nats-server of its own under `work`."""

    def __init__(self, url: str, work: Path) -> None:
        self.url = url
        self.work = work
        self.nats = NatsServer(work / "nats", log_file=work / "nats.log")
        self.child: Child | None = None
        self.http = ""

    def __enter__(self) -> Inbox:
        self.nats.start()
        port, ops = free_port(), free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("DESK_")}
        digest = hashlib.sha256(TOKEN.encode()).hexdigest()
        env.update(
            {
                "DESK_NATS_URL": self.nats.url,
                "DESK_VAR_DIR": str(self.work / "var"),
                "DESK_DATABASE_URL": self.url,
                "DESK_HTTP_PORT": str(port),
                "DESK_OPS_PORT": str(ops),
                "DESK_LOG_LEVEL": "WARNING",
                # a freshly loaded year has thousands of waiting items never escalated: its
                # scan would spend the timed minutes escalating them (a year in production
                # escalated each when it was due)
                "DESK_SLA_SCAN_SECONDS": "3600",
                "DESK_REVIEWERS": json.dumps(
                    [{"name": "bench", "role": "reviewer", "token_sha256": digest}]
                ),
                "DESK_AUDIT_KEY": secrets.token_urlsafe(32),
            }
        )
        self.child = Child(["desk", "inbox_api"], env, self.work / "inbox_api.log")
        self.child.start(f"http://127.0.0.1:{ops}/readyz", timeout=600)
        self.http = f"http://127.0.0.1:{port}"
        return self

    def __exit__(self, *exc: object) -> None:
        if self.child is not None:
            self.child.stop()
        self.nats.kill()


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


def queries(api: httpx.Client, repeat: int) -> dict[str, dict[str, float]]:
    rng = random.Random(11)

    def items(**params: Any) -> dict[str, Any]:
        answer = api.get("/api/items", params=params)
        answer.raise_for_status()
        found: dict[str, Any] = answer.json()
        return found

    page = items(status="sent", limit=50)
    for _ in range(20):  # a cursor twenty pages into the sent items
        page = items(status="sent", limit=50, cursor=page["next_cursor"])
    deep = page["next_cursor"]
    page = items(sort="priority", limit=50)
    for _ in range(20):  # twenty pages into everything in the priority order
        page = items(sort="priority", limit=50, cursor=page["next_cursor"])
    deep_priority = page["next_cursor"]
    known = [i["id"] for i in items(status="sent")["items"]]
    to_decide = [i["id"] for i in items(status="waiting", limit=200)["items"]]

    def decide(n: int) -> None:
        answer = api.post(
            f"/api/items/{to_decide[n % len(to_decide)]}/decision", json={"type": "ignore"}
        )
        answer.raise_for_status()

    def one(n: int) -> None:
        api.get(f"/api/items/{known[n % len(known)]}").raise_for_status()

    cases: dict[str, Callable[[int], Any]] = {
        "list waiting (first page)": lambda n: items(status="waiting"),
        "list every status, newest first": lambda n: items(sort="newest"),
        "list sent, 20 pages in": lambda n: items(status="sent", cursor=deep),
        "filter waiting by category": lambda n: items(status="waiting", category=CATEGORIES[n % 6]),
        "filter waiting by queue": lambda n: items(status="waiting", queue=QUEUES[n % 4]),
        "filter sent by category": lambda n: items(status="sent", category=CATEGORIES[n % 6]),
        "filter every status by queue": lambda n: items(queue=QUEUES[n % 4]),
        "sort waiting by priority": lambda n: items(status="waiting", sort="priority"),
        "sort everything by priority, 20 pages in": lambda n: items(
            sort="priority", cursor=deep_priority
        ),
        "text search, waiting": lambda n: items(status="waiting", text=rng.choice(WORDS)),
        "text search, every status": lambda n: items(text=rng.choice(WORDS)),
        "text search, a ticket id": lambda n: items(text=f"B{rng.randrange(0, 10_000):07d}"),
        "one item": one,
        "a decision": decide,
    }
    return {
        name: timed(call, min(repeat, len(to_decide) - 1) if name == "a decision" else repeat)
        for name, call in cases.items()
    }


def run_on(url: str, items: int, repeat: int, work: Path) -> dict[str, Any]:
    engine = make_engine(url)
    try:
        with Inbox(url, work / "first"):  # its first start lays out the tables
            pass
        drop_search_index(engine)
        log(f"{engine.dialect.name}: seeding {items:,} items")
        seeded = seed(engine, items)
    finally:
        engine.dispose()
    log(f"  seeded in {seeded:.0f} s; the inbox_api indexes them for search and is timed")
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with (
        Inbox(url, work / "second") as inbox,
        httpx.Client(base_url=inbox.http, headers=headers, timeout=30) as api,
    ):
        analyze(url)  # the search index is there now: its statistics too
        timings = queries(api, repeat)
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
            url = database_url(None, Path(tmp) / "sqlite", "inbox")
            results.append(run_on(url, items, repeat, Path(tmp) / "sqlite"))
        if "postgresql" in databases:
            schema = postgres_schema()
            if schema is None:
                log("no PostgreSQL answers at 127.0.0.1:5432: its run is left out")
            else:
                try:
                    url = f"{POSTGRES_URL}?options=-csearch_path%3D{schema}"
                    results.append(run_on(url, items, repeat, Path(tmp) / "postgresql"))
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
