"""Where threads live: the offline default, and LangGraph's Postgres saver on a real server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from langgraph.graph.state import CompiledStateGraph

from desk.natsserver import NatsServer
from services.drafter.checkpoints import postgres_url
from shared import subjects
from shared.bus import Bus
from standins.llm import FakeLLM
from tests.helpers import eventually, messages
from tests.postgres import POSTGRES_URL, fresh_schema, url_in

from .conftest import Harness, decide, items, send_event

Graph = CompiledStateGraph[Any, Any, Any, Any]


def test_only_postgres_urls_select_the_postgres_saver() -> None:
    assert postgres_url("postgresql+psycopg://u@h/db") == "postgresql://u@h/db"
    assert postgres_url("postgres://u@h/db") == "postgresql://u@h/db"
    assert postgres_url("sqlite:///var/desk.sqlite") is None
    assert postgres_url(None) is None


async def test_offline_model_drafts_without_any_endpoint_and_honours_feedback(
    bus: Bus, nats_server: NatsServer, tmp_path: Path
) -> None:
    harness = Harness(nats_server, tmp_path, llm=None)
    try:
        process = harness.start()
        await send_event(bus, "T1033", "evt_zh")
        await eventually(lambda: items(bus), timeout=20, message="an offline draft")
        [v1] = await items(bus)
        assert "您好" in v1.action_request.args["reply"]
        assert "offline model" in process.tail()
        await decide(bus, v1, "response", "add our opening hours")
        await eventually(lambda: _at_least(bus, 2), timeout=20, message="the redraft")
        v2 = (await items(bus))[1]
        assert v2.version == 2 and v2.feedback == ["add our opening hours"]
        # an instruction it cannot follow is the reviewer's to act on, never pasted to the customer
        assert "opening hours" not in v2.action_request.args["reply"].lower()
        assert "您好" in v2.action_request.args["reply"]
    finally:
        harness.stop_all()


@pytest.fixture
def postgres_schema() -> Iterator[str]:
    with fresh_schema() as schema:
        yield schema


async def test_threads_survive_a_restart_in_postgres(
    bus: Bus, nats_server: NatsServer, tmp_path: Path, fake_llm: FakeLLM, postgres_schema: str
) -> None:
    harness = Harness(nats_server, tmp_path, fake_llm)
    harness.env["DESK_DATABASE_URL"] = url_in(postgres_schema)
    try:
        first = harness.start()
        await send_event(bus, "T1041", "evt_pg")
        await eventually(lambda: items(bus), timeout=20, message="version 1")
        first.stop()

        harness.start()  # a new process: the thread comes back from PostgreSQL
        [v1] = await items(bus)
        await decide(bus, v1, "response", "Quote the invoice number")
        await eventually(lambda: _at_least(bus, 2), timeout=20, message="version 2")
        assert len(fake_llm.requests) == 2
        with psycopg.connect(POSTGRES_URL) as conn:
            [(count,)] = conn.execute(
                f"SELECT count(*) FROM {postgres_schema}.checkpoints WHERE thread_id = 'T1041'"
            ).fetchall()
        assert count > 0
    finally:
        harness.stop_all()


async def _at_least(bus: Bus, n: int) -> bool:
    return len(await items(bus)) >= n


async def test_threads_go_on_after_postgresql_dropped_every_connection(
    bus: Bus, nats_server: NatsServer, tmp_path: Path, fake_llm: FakeLLM, postgres_schema: str
) -> None:
    """What a PostgreSQL restart or failover does: every backend terminated. The drafter must
    get new connections by itself, not dead-letter every ticket from then on."""
    harness = Harness(nats_server, tmp_path, fake_llm)
    harness.env["DESK_DATABASE_URL"] = url_in(postgres_schema)
    try:
        drafter = harness.start()
        await send_event(bus, "T1041", "evt_before")
        await eventually(lambda: items(bus), timeout=20, message="the first draft")
        assert drafter.proc is not None
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            [(terminated,)] = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = %s",
                (f"desk-drafter-{drafter.proc.pid}",),
            ).fetchall()
        assert terminated >= 1
        await send_event(bus, "T1002", "evt_after")
        await eventually(lambda: _at_least(bus, 2), timeout=30, message="the draft after")
        assert await messages(bus.js, subjects.DLQ) == []
        ready = httpx.get(f"{drafter.ops_url}/readyz", timeout=5).json()
        assert ready["checks"]["database"] is True, ready
    finally:
        harness.stop_all()


async def test_sqlite_threads_saved_by_langgraphs_async_saver_go_on_and_runs_overlap(
    tmp_path: Path,
) -> None:
    """The SQLite checkpointer is LangGraph's own tables and rows, one thread per saver: a
    thread an earlier drafter saved through `AsyncSqliteSaver` is read and resumed as it was,
    and sixteen runs at once each stop at their own review with their own ticket."""
    import asyncio
    import sqlite3

    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from langgraph.types import Command

    from desk.helpdesk import ensure_demo
    from services.drafter import DURABILITY, Deps, OfflineDraftModel, Work, build_graph
    from services.drafter.checkpoints import open_storage
    from shared.helpdesk.sql import SqlSource

    helpdesk = f"sqlite:///{tmp_path / 'helpdesk.sqlite'}"
    ensure_demo(helpdesk)
    source = SqlSource(helpdesk)
    deps = Deps(source=source, model=OfflineDraftModel())
    trigger = {"source": "helpdesk", "type": "ticket.created", "event_id": "evt"}
    open_ = (2, 3, 4, 5, 7, 9, 10, 12, 13, 14, 15, 17, 19, 20, 21, 22)  # demo tickets awaiting us
    tickets = [f"T{1000 + n}" for n in open_]

    def config(ticket: str) -> RunnableConfig:
        return RunnableConfig(configurable={"thread_id": ticket})

    def start(ticket: str) -> dict[str, Any]:
        return Work(ticket, ticket, None, trigger, None).start()

    path = tmp_path / "var" / "drafter-checkpoints.sqlite"  # where the drafter keeps them
    path.parent.mkdir(mode=0o700)
    async with AsyncSqliteSaver.from_conn_string(str(path)) as old:
        graph: Graph = build_graph().compile(checkpointer=old)
        await graph.ainvoke(start("T1002"), config("T1002"), context=deps, durability=DURABILITY)
        before = await graph.aget_state(config("T1002"))
    assert before.interrupts

    try:
        async with open_storage(None, tmp_path / "var") as storage:
            reopened: Graph = build_graph().compile(
                checkpointer=storage.checkpointer, store=storage.store
            )
            assert (await reopened.aget_state(config("T1002"))).values == before.values
            runs = [
                reopened.ainvoke(start(t), config(t), context=deps, durability=DURABILITY)
                for t in tickets[1:]
            ]
            ran = await asyncio.gather(*runs)
            for ticket, out in zip(tickets[1:], ran, strict=True):
                assert out["__interrupt__"][0].value["ticket_id"] == ticket
                state = await reopened.aget_state(config(ticket))
                assert state.interrupts and state.values["ticket_id"] == ticket
            # the old thread resumes where it waited: an accept finishes it
            item = before.interrupts[0].value
            accept = {
                "type": "accept",
                "item_id": item["id"],
                "thread": "T1002",
                "version": item["version"],
                "round": item["round"],
                "reviewer": "ana",
                "decided_at": "2026-12-03T12:00:00Z",
            }
            await reopened.ainvoke(
                Command(resume=accept), config("T1002"), context=deps, durability=DURABILITY
            )
            done = await reopened.aget_state(config("T1002"))
            assert not done.next and done.values.get("outcome") == "accepted"
    finally:
        await source.close()
    with sqlite3.connect(path) as conn:  # one thread each, every run's checkpoint on disk
        threads = {row[0] for row in conn.execute("SELECT DISTINCT thread_id FROM checkpoints")}
    assert threads == set(tickets)
