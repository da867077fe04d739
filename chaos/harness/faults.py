"""The fault injector: SIGKILL each service once and the broker once (in a cluster, the node
leading the events stream), LLM 503s, a model outage (500s, then refused connections, then
answers slower than the drafter's timeout: three minutes at the default size), a channel
outage, a PostgreSQL outage with --postgres; a stale scan between two faults. Each fault is
recorded, with any recovery that did not come."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from typing import Any

from standins.channel import FakeChannel
from standins.llm import FakeLLM

from .. import postgres, stale
from ..facts import Run, log
from .observation import stream_leader
from .stack import SERVICES, is_nats, is_service, nats_pids, service_pid


def planned(run: Run) -> list[str]:
    """The faults a run injects, each once."""
    faults = [f"kill:{s}" for s in SERVICES] + ["kill:nats", "llm:503", "llm:outage"]
    faults.append("channel:503")
    if run.database_url:
        faults.append("postgres:outage")
    return faults


def injector(run: Run, llm: FakeLLM, channel: FakeChannel, seed: int) -> None:
    rng = random.Random(f"{seed}/faults")
    faults = planned(run)
    rng.shuffle(faults)
    # start once the first events are in flight
    while run.sends < max(3, run.events // 10) and not run.sending_done.is_set():
        if run.stop.wait(0.2):
            return
    # 0.6-1.8 s between faults in a small run (each killed service is back before the next);
    # a big run spreads its faults over its longer life
    spread = max(0.6, run.events / 400)
    for done, fault in enumerate(faults):
        if done in stale.SCAN_AFTER:  # a stale scan between two faults; wait until it ran
            number = stale.SCAN_AFTER.index(done) + 1
            run.scans_wanted = number
            if not _wait(run, lambda number=number: run.scans_run >= number, 400):
                run.fault_problems.append(f"stale scan {number} did not run within 400s")
        if run.stop.wait(rng.uniform(1.0, 3.0) * spread):
            return
        kind, what = fault.split(":")
        if kind == "kill" and what == "nats":
            kill_broker(run)
        elif kind == "kill":
            pid = service_pid(run.var, what)
            if pid is None or not is_service(pid, what):
                run.fault_problems.append(f"{what}: no live pid to kill")
                continue
            os.kill(pid, signal.SIGKILL)
            run.faults.append(f"SIGKILL {what}({pid})")
            log(f"SIGKILL {what} pid {pid}")
            if not _wait(
                run, lambda pid=pid, what=what: (service_pid(run.var, what) or pid) != pid, 20
            ):
                run.fault_problems.append(f"{what} was not restarted within 20s")
        elif fault == "llm:outage":
            model_outage(run, llm, outage_seconds(run.events))
        elif kind == "llm":
            times = rng.randint(4, 10)
            llm.fail_next(503, times=times)
            run.faults.append(f"LLM 503 x{times}")
            log(f"LLM answers 503 to the next {times} requests")
        elif kind == "postgres":
            database_outage(run, rng.uniform(3.0, 8.0))
        elif kind == "channel":
            seconds = rng.uniform(3.0, 6.0)
            channel.fail_for(seconds)
            run.faults.append(f"channel 503 for {seconds:.1f}s")
            log(f"channel answers 503 for {seconds:.1f}s")
    run.faults_done.set()


def kill_broker(run: Run) -> None:
    """SIGKILL the broker (in a cluster: the node leading the events stream) and see it back."""
    pids = nats_pids(run.var)
    name = next(iter(pids), None)
    if run.cluster:
        try:
            name = asyncio.run(stream_leader(run.admin_url, "EVENTS"))
        except Exception as exc:
            run.fault_problems.append(f"no events stream leader: {exc.__class__.__name__}")
            return
    pid = pids.get(name or "")
    if name is None or pid is None or not is_nats(pid):
        run.fault_problems.append(f"nats-server {name}: no live pid to kill")
        return
    os.kill(pid, signal.SIGKILL)
    what = f"nats-server {name}" + (" (events stream leader)" if run.cluster else "")
    run.faults.append(f"SIGKILL {what}({pid})")
    log(f"SIGKILL {what} pid {pid}")
    if not _wait(run, lambda: nats_pids(run.var).get(name, pid) != pid, 40):
        run.fault_problems.append(f"nats-server {name} was not restarted within 40s")


def outage_seconds(events: int) -> float:
    """A model outage's length: three minutes at the default 2,000 events, shorter in a small
    run (at least 6 s, so each of its three kinds meets the drafter's breaker)."""
    return max(6.0, min(180.0, events * 0.09))


def model_outage(run: Run, llm: FakeLLM, seconds: float) -> None:
    """The model endpoint away for `seconds`: a third answering 500, a third refusing
    connections, a third hanging past the drafter's timeout. Tickets wait for it; none may
    be dead-lettered (the report's invariants say so)."""
    third = seconds / 3
    llm.down("error", status=500)
    log(f"model endpoint down for {seconds:.0f}s: 500s")
    run.stop.wait(third)
    llm.stop()
    log("model endpoint refusing connections")
    run.stop.wait(third)
    llm.start()
    llm.down("hang", seconds=max(120.0, third * 2))
    log("model endpoint hanging past the timeout")
    run.stop.wait(third)
    llm.restore()
    run.faults.append(f"model outage {seconds:.0f}s (500, refused, hanging)")
    log("model endpoint answering again")


def database_outage(run: Run, seconds: float) -> None:
    """What a PostgreSQL restart or failover does: every connection terminated and new ones
    refused for `seconds`; no service is restarted."""
    assert run.database_url
    with postgres.outage(run.database_url) as swept:
        run.stop.wait(seconds)
    run.faults.append(f"PostgreSQL outage {seconds:.1f}s ({sum(swept)} connections terminated)")
    log(f"PostgreSQL refused connections for {seconds:.1f}s; {sum(swept)} terminated")
    if not sum(swept):
        run.fault_problems.append("the PostgreSQL outage found no connection to terminate")


def _wait(run: Run, check: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        if run.stop.wait(0.2):
            return False
    return False
