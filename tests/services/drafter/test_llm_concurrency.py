"""The model's own concurrency: a real drafter keeps DESK_LLM_CONCURRENCY calls in flight to a
slow OpenAI-compatible endpoint (more than the bus's DESK_CONCURRENCY), and when the endpoint
fills up (429 with Retry-After) it halves its calls in flight, waits, and loses nothing."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.messages import HumanMessage, SystemMessage

from desk.natsserver import NatsServer
from services.drafter.limiter import Call, Limiter
from services.drafter.model import ask, close_model, make_model
from shared import subjects
from shared.bus import Bus
from shared.settings import DrafterSettings
from standins.llm import FakeLLM, default_responder
from tests.helpers import eventually

from .conftest import Harness, items, settled
from .test_conversations import mail_event

PROMPT = [SystemMessage("Draft a reply."), HumanMessage("Where is my refund?")]


async def drafted(bus: Bus, count: int) -> bool:
    return len(await items(bus)) >= count


def metric(process_ops_url: str, name: str) -> float:
    text = httpx.get(process_ops_url + "/metrics", timeout=5).text
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not exported")


async def test_a_drafter_keeps_its_llm_concurrency_in_flight_beyond_the_bus_concurrency(
    bus: Bus, nats_server: NatsServer, tmp_path: Path
) -> None:
    with FakeLLM(delay=1.0) as slow:
        harness = Harness(nats_server, tmp_path, slow)
        try:
            harness.start(DESK_CONCURRENCY="4", DESK_LLM_CONCURRENCY="12", DESK_ACK_WAIT="2")
            for n in range(30):  # 30 conversations of their own: nothing serializes them
                await mail_event(bus, f"m{n}@mail.example", f"Question number {n}.")

            async def held() -> bool:  # 12 calls, 12 waiting with their call ready, 4 more
                info = await bus.js.consumer_info(subjects.WORK, "drafter")
                return info.num_ack_pending == 2 * 12 + 4

            await eventually(held, timeout=30, message="28 deliveries held at once")
            await eventually(lambda: drafted(bus, 30), timeout=60, message="30 drafts")
            await eventually(lambda: settled(bus), timeout=20, message="all acked")
        finally:
            harness.stop_all()
    assert slow.most_in_flight == 12  # the model's limit, not the bus's 4
    assert len(slow.requests) == 30  # a 1 s call under a 2 s ack wait: none redelivered


async def test_a_full_endpoint_halves_the_calls_in_flight_and_every_draft_still_comes(
    bus: Bus, nats_server: NatsServer, tmp_path: Path
) -> None:
    with FakeLLM(delay=0.3, capacity=4, busy_retry_after=0.5) as full:
        harness = Harness(nats_server, tmp_path, full)
        try:
            drafter = harness.start(DESK_LLM_CONCURRENCY="16", DESK_MAX_DELIVER="1")
            for n in range(20):  # more at once than the endpoint takes
                await mail_event(bus, f"f{n}@mail.example", f"Question number {n}.")
            await eventually(lambda: drafted(bus, 20), timeout=90, message="20 drafts")
            await eventually(lambda: settled(bus), timeout=20, message="all acked")
            assert metric(drafter.ops_url, "desk_drafter_llm_overloaded_total") >= 1
            assert metric(drafter.ops_url, "desk_drafter_llm_concurrency_limit") < 16
        finally:
            harness.stop_all()
    assert full.refused_busy > 0  # it did fill up
    # a 429 spends no attempt (one allowed here): nothing was dead-lettered, each mail drafted
    assert len({i.thread for i in await items(bus)}) == 20
    dead = await bus.js.stream_info("DLQ")
    assert dead.state.messages == 0


async def test_the_limit_halves_once_per_cooldown_and_grows_back_one_slot_a_round() -> None:
    now = [0.0]
    limiter = Limiter(16, cooldown=1.0, clock=lambda: now[0])
    limiter.overloaded(None)
    limiter.overloaded(None)  # the other calls of the same burst: one signal
    assert limiter.slots == 8
    now[0] = 1.5
    limiter.overloaded(None)
    assert limiter.slots == 4
    for _ in range(3):  # each answer adds 1/limit: about one slot per round of answers
        limiter.answered()
    assert limiter.slots == 4
    for _ in range(2):
        limiter.answered()
    assert limiter.slots == 5
    for _ in range(200):
        limiter.answered()
    assert limiter.slots == 16  # never above the ceiling
    for _ in range(10):
        now[0] += 2
        limiter.overloaded(None)
    assert limiter.slots == 1  # never below one


async def test_slots_bound_the_calls_and_a_retry_after_holds_new_ones() -> None:
    limiter = Limiter(3)
    running, most = 0, 0
    release = asyncio.Event()

    async def call() -> None:
        nonlocal running, most
        await limiter.acquire()
        try:
            running += 1
            most = max(most, running)
            await release.wait()
            running -= 1
        finally:
            await limiter.release()

    tasks = [asyncio.create_task(call()) for _ in range(7)]
    await eventually(lambda: running == 3, timeout=5, message="three calls running")
    assert limiter.in_flight == 3
    release.set()
    await asyncio.gather(*tasks)
    assert most == 3 and limiter.in_flight == 0

    limiter.overloaded(0.4)  # the endpoint asked for 0.4 s
    started = time.monotonic()
    await limiter.acquire()
    waited = time.monotonic() - started
    await limiter.release()
    assert waited >= 0.39


async def test_a_call_holds_its_slot_only_while_the_endpoint_has_it(fake_llm: FakeLLM) -> None:
    """The slot is taken once the request is built and given back when the answer is in:
    preparing the request and reading the answer, turns of a busy event loop, hold none."""
    limiter = Limiter(1)
    seen: list[tuple[str, int]] = []

    class Watch(AsyncCallbackHandler):
        async def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
            seen.append(("before the request", limiter.in_flight))

        async def on_llm_end(self, *args: Any, **kwargs: Any) -> None:
            seen.append(("after the answer", limiter.in_flight))

    def answering(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(("at the endpoint", limiter.in_flight))
        return default_responder(body)

    fake_llm.responder = answering
    model = make_model(DrafterSettings(llm_base_url=fake_llm.url, llm_api_key="k"))
    model.callbacks = [Watch()]
    try:
        answer = await ask(model, PROMPT, "tool", limiter)
    finally:
        await close_model(model)
    assert answer.draft is not None
    assert seen == [("before the request", 0), ("at the endpoint", 1), ("after the answer", 0)]
    assert limiter.in_flight == 0


async def test_only_as_many_deliveries_as_slots_prepare_a_call_at_once() -> None:
    """A burst of deliveries: the first C prepare their calls (the ticket, the checkpoints,
    the request) without the others' work in between, so the first calls go out sooner; a
    place goes to the next delivery as soon as a call has its slot."""
    limiter = Limiter(2)
    preparing, most, done = 0, 0, 0
    ready = asyncio.Event()

    async def delivery() -> None:
        nonlocal preparing, most, done
        async with limiter.ahead():
            preparing += 1
            most = max(most, preparing)
            await ready.wait()
            call = Call(limiter)
            await call.take()
            preparing -= 1
            await call.give_back()
            done += 1

    tasks = [asyncio.create_task(delivery()) for _ in range(5)]
    await eventually(lambda: preparing == 2, timeout=5, message="two deliveries preparing")
    for _ in range(20):  # the others stay out, however often the loop turns
        await asyncio.sleep(0)
    assert preparing == 2 and done == 0
    ready.set()
    await asyncio.gather(*tasks)
    assert most == 2 and done == 5 and limiter.in_flight == 0


def test_a_limiter_needs_a_ceiling() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Limiter(0)
