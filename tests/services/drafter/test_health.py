"""The model endpoint's breaker: an outage is waited out (never a dead letter), one call probes
it, and only a ticket that keeps failing while the model answers others goes to a person."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import REGISTRY

from services.drafter.health import EndpointFailure, Health, ModelFailed
from services.drafter.model import ask, learned_mode
from shared.errors import Unavailable
from standins.llm import FakeLLM
from tests.services.drafter.test_model import PROMPT, _closed, client  # noqa: F401


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _up() -> float | None:
    return REGISTRY.get_sample_value("desk_model_up")


def _failure(kind: str = "server") -> EndpointFailure:
    return EndpointFailure("model endpoint answered 500", kind=kind)


def test_consecutive_failures_make_the_model_down_and_every_call_waits() -> None:
    clock = Clock()
    health = Health(down_after=3, probe_interval=15, clock=clock)
    for _ in range(2):
        health.admit()
        assert isinstance(health.failed(_failure()), Unavailable)  # waits, spends no attempt
    assert health.up and _up() == 1
    health.admit()
    waited = health.failed(_failure())
    assert isinstance(waited, Unavailable) and not isinstance(waited, ModelFailed)
    assert not health.up and _up() == 0
    assert health.describe().startswith("down since ") and "answered 500" in health.describe()
    assert health.degraded() == {"model": health.describe()}
    with pytest.raises(Unavailable) as held:  # no call is made while it is down
        health.admit()
    assert held.value.retry_after == pytest.approx(15)


def test_one_probe_at_a_time_and_an_answer_brings_it_back() -> None:
    clock = Clock()
    health = Health(down_after=2, probe_interval=10, clock=clock)
    for _ in range(2):
        health.admit()
        health.failed(_failure("unreachable"))
    clock.now += 10
    health.admit()  # the probe
    with pytest.raises(Unavailable):
        health.admit()  # the others wait for the probe
    health.failed(_failure("timeout"))  # the probe failed: down for another interval
    assert not health.up
    clock.now += 10
    health.admit()
    health.answered()
    assert health.up and health.recoveries == 1 and _up() == 1 and health.degraded() == {}
    health.admit()  # everyone goes ahead again
    health.admit()


def test_a_ticket_that_keeps_failing_while_the_model_answers_others_goes_to_a_person() -> None:
    health = Health(down_after=3, ticket_failures=3, clock=Clock())
    outcomes = []
    for _ in range(3):
        with health.ticket("T1"):
            health.admit()
            outcomes.append(health.failed(_failure()))
        with health.ticket("T2"):
            health.admit()
            health.answered()  # the model answers other tickets: it is up
    assert [type(o) for o in outcomes] == [Unavailable, Unavailable, ModelFailed]
    assert "3 times on this ticket" in str(outcomes[-1])
    assert health.up


def test_a_ticket_alone_in_an_outage_of_any_length_is_never_given_up() -> None:
    clock = Clock()
    health = Health(down_after=3, probe_interval=5, ticket_failures=3, clock=clock)
    for _ in range(50):
        with health.ticket("T1"):
            try:
                health.admit()
            except Unavailable:
                clock.now += 5
                continue
            assert not isinstance(health.failed(_failure()), ModelFailed)
    assert not health.up


async def test_reports_are_written_on_change_and_refreshed_while_down() -> None:
    class Written:
        def __init__(self) -> None:
            self.states: list[bool] = []

        async def write(self, state: object) -> None:
            self.states.append(state.up)  # type: ignore[attr-defined]

    clock = Clock()
    health = Health(down_after=1, probe_interval=5, clock=clock)
    writer = Written()
    await health.report(writer)  # type: ignore[arg-type]
    await health.report(writer)  # type: ignore[arg-type]
    assert writer.states == [True]
    health.admit()
    health.failed(_failure())
    await health.report(writer)  # type: ignore[arg-type]
    clock.now += 30
    await health.report(writer)  # type: ignore[arg-type]
    clock.now += 40
    await health.report(writer)  # type: ignore[arg-type]  # a minute since: refreshed
    assert writer.states == [True, False, False]


async def test_calls_to_a_failing_endpoint_stop_once_it_is_down(fake_llm: FakeLLM) -> None:
    fake_llm.down("error", status=503)
    model = client(fake_llm)
    health = Health(down_after=3, probe_interval=60)
    for _ in range(3):
        with pytest.raises(Unavailable):
            await ask(model, PROMPT, health=health)
    assert not health.up and len(fake_llm.requests) == 3
    for _ in range(5):
        with pytest.raises(Unavailable, match="down since"):
            await ask(model, PROMPT, health=health)
    assert len(fake_llm.requests) == 3  # held before the call: the endpoint is not hammered


async def test_auto_asks_for_the_tool_again_once_the_endpoint_came_back(
    fake_llm: FakeLLM,
) -> None:
    """A spell of prose answers moves auto down to JSON; after the endpoint's outage it asks for
    the forced tool call again instead of keeping plain JSON until a restart."""
    model = client(fake_llm)
    health = Health(down_after=1, probe_interval=0.1)
    fake_llm.answer_text_next("not a draft", times=2)  # ignored tool, then ignored schema
    await ask(model, PROMPT, health=health)
    await ask(model, PROMPT, health=health)
    assert learned_mode(model) == "json"
    fake_llm.down("error")
    with pytest.raises(Unavailable):
        await ask(model, PROMPT, health=health)
    fake_llm.restore()
    await _after_probe_interval(health)
    answer = await ask(model, PROMPT, health=health)
    assert answer.draft is not None and learned_mode(model) == "tool"


async def _after_probe_interval(health: Health) -> None:
    await asyncio.sleep(health.breaker.retry_after())
