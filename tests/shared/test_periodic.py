"""Periodic work: passes on an interval or when woken, failures logged and retried, a pass
under way finished on stop (or cut short at the timeout), and a final pass after it."""

from __future__ import annotations

import asyncio
import logging

import psycopg
import pytest
import sqlalchemy.exc

from shared.errors import TransientError
from shared.periodic import Periodic
from tests.helpers import eventually


async def test_passes_come_every_interval_and_at_once_when_woken() -> None:
    passes: list[float] = []
    loop = asyncio.get_running_loop()

    async def work() -> None:
        passes.append(loop.time())

    periodic = Periodic("probe", 60, work).start()  # the interval alone would take a minute
    try:
        await eventually(lambda: len(passes) == 1, message="the first pass, at once")
        periodic.wake()
        await eventually(lambda: len(passes) == 2, message="a pass when woken")
    finally:
        await periodic.stop(5)


async def test_a_failed_pass_is_logged_once_and_the_next_one_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls = 0

    async def work() -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise TransientError("helpdesk answered 503")
        if calls == 2:
            raise sqlalchemy.exc.OperationalError(
                "SELECT 1", {}, psycopg.OperationalError("connection refused")
            )
        if calls == 3:
            raise RuntimeError("a bug")

    caplog.set_level(logging.WARNING, logger="shared.periodic")
    periodic = Periodic("probe pass", 0.01, work).start()
    try:
        await eventually(lambda: calls >= 4, message="passes after three failures")
    finally:
        await periodic.stop(5)
    lines = [(r.levelname, r.getMessage(), r.exc_info is not None) for r in caplog.records]
    assert lines[0] == (
        "WARNING",
        "probe pass failed, next one in 0s: helpdesk answered 503",
        False,
    )
    assert lines[1] == ("WARNING", "probe pass waits for the database: OperationalError", False)
    assert lines[2][:2] == ("ERROR", "probe pass failed; the next pass retries")
    assert lines[2][2], "a bug comes with its traceback"


async def test_stop_lets_the_pass_under_way_finish_then_the_final_pass_runs() -> None:
    started, finished = asyncio.Event(), list[int]()

    async def work() -> None:
        started.set()
        await asyncio.sleep(0.3)
        finished.append(len(finished) + 1)

    periodic = Periodic("relay", 60, work, final=True).start()
    await asyncio.wait_for(started.wait(), 5)
    await periodic.stop(5)
    assert finished == [1], "the pass under way finished"
    await periodic.finish(5)
    assert finished == [1, 2], "and the final pass ran after it"


async def test_a_pass_longer_than_the_drain_timeout_is_cut_short() -> None:
    started = asyncio.Event()

    async def work() -> None:
        started.set()
        await asyncio.sleep(60)

    periodic = Periodic("stuck", 60, work).start()
    await asyncio.wait_for(started.wait(), 5)
    loop = asyncio.get_running_loop()
    began = loop.time()
    await periodic.stop(0.2)
    assert loop.time() - began < 2
