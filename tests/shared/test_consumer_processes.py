"""The runtime across real processes: crashes, competing workers and graceful drain."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from desk.natsserver import NatsServer
from shared import subjects
from shared.bus import Bus
from shared.envelope import Envelope
from tests.helpers import eventually, messages

ROOT = Path(__file__).resolve().parents[2]


class Workers:
    def __init__(self, nats: NatsServer, out: Path) -> None:
        self.nats = nats
        self.out = out
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, *args: str) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "DESK_NATS_URL": self.nats.url,
            "DESK_HTTP_PORT": "0",
            "DESK_DRAIN_TIMEOUT": "10",
        }
        log = open(self.out / f"worker-{len(self.procs)}.log", "wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.shared.worker", str(self.out), *args],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        self.procs.append(proc)
        return proc

    def lines(self, name: str) -> list[list[str]]:
        path = self.out / name
        return [line.split() for line in path.read_text().splitlines()] if path.exists() else []

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture
def workers(nats_server: NatsServer, tmp_path: Path) -> Iterator[Workers]:
    out = tmp_path / "out"
    out.mkdir()
    w = Workers(nats_server, out)
    try:
        yield w
    finally:
        w.stop_all()


async def publish_many(bus: Bus, count: int) -> None:
    for i in range(count):
        data = Envelope(source="test", type="t", data={"n": i}).to_bytes()
        await bus.publish(subjects.work("proc", "job"), data, msg_id=f"job-{i}")


async def test_a_worker_killed_mid_handler_is_redelivered_and_the_effect_happens_once(
    bus: Bus, workers: Workers
) -> None:
    first = workers.start("--hang-first")
    await eventually(lambda: workers.lines("ready"), timeout=20, message="worker ready")
    await publish_many(bus, 1)
    await eventually(lambda: workers.lines("hanging"), message="the handler to be mid-way")

    first.send_signal(signal.SIGKILL)
    first.wait()
    second = workers.start()

    await eventually(
        lambda: any(d[1] == "2" for d in workers.lines("deliveries")),
        timeout=20,
        message="the redelivery after ack-wait",
    )

    async def acked() -> bool:
        info = await bus.js.consumer_info(subjects.WORK, "workers")
        return info.num_ack_pending == 0 and info.num_pending == 0

    await eventually(acked, message="the redelivered message to be acked")
    deliveries = workers.lines("deliveries")
    assert [(d[0], d[1]) for d in deliveries] == [("job-0", "1"), ("job-0", "2")]
    assert deliveries[1][2] == str(second.pid)
    assert workers.lines("effects") == [["job-0", str(first.pid)]]


async def test_two_workers_on_one_durable_handle_every_message_exactly_once(
    bus: Bus, workers: Workers
) -> None:
    a = workers.start("--delay", "0.01")
    b = workers.start("--delay", "0.01")
    await eventually(lambda: len(workers.lines("ready")) == 2, timeout=20, message="both ready")

    await publish_many(bus, 500)
    await eventually(
        lambda: len(workers.lines("effects")) >= 500, timeout=60, message="500 side effects"
    )

    effects = workers.lines("effects")
    deliveries = workers.lines("deliveries")
    assert len(effects) == 500
    assert {e[0] for e in effects} == {f"job-{i}" for i in range(500)}
    assert len(deliveries) == 500, "no message was handled twice"
    by_pid = Counter(e[1] for e in effects)
    assert set(by_pid) == {str(a.pid), str(b.pid)}, f"both processes did work: {by_pid}"


async def test_sigterm_drains_in_flight_work_and_loses_nothing(bus: Bus, workers: Workers) -> None:
    first = workers.start("--delay", "0.5", "--concurrency", "4")
    await eventually(lambda: workers.lines("ready"), timeout=20, message="worker ready")
    await publish_many(bus, 20)
    await eventually(lambda: len(workers.lines("deliveries")) >= 6, message="work under way")

    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=30) == 0
    handled_before_stop = len(workers.lines("effects"))
    assert handled_before_stop < 20

    workers.start("--concurrency", "4")
    await eventually(lambda: len(workers.lines("effects")) == 20, timeout=30, message="all 20")
    deliveries = workers.lines("deliveries")
    assert all(d[1] == "1" for d in deliveries), "nothing in flight was abandoned to ack-wait"
    assert len(deliveries) == 20


async def test_a_worker_dying_on_the_last_allowed_attempt_still_ends_in_the_dlq(
    bus: Bus, workers: Workers
) -> None:
    first = workers.start("--hang-first", "--max-deliver", "1")
    await eventually(lambda: workers.lines("ready"), timeout=20, message="worker ready")
    await publish_many(bus, 1)
    await eventually(lambda: workers.lines("hanging"), message="the handler to be mid-way")
    first.send_signal(signal.SIGKILL)
    first.wait()
    workers.start("--max-deliver", "1")

    async def dead_lettered() -> bool:
        return (await bus.js.stream_info(subjects.DLQ)).state.messages == 1

    await eventually(dead_lettered, timeout=20, message="the dead letter")
    [dead] = await messages(bus.js, subjects.DLQ)
    assert dead.headers["Desk-Dlq-Reason"] == "retries_exhausted"
    assert dead.headers["Desk-Original-Msg-Id"] == "job-0"
    assert len(workers.lines("deliveries")) == 1, "the handler is not run past max deliveries"
