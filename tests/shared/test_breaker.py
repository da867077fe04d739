"""The channel circuit breaker as a pure state machine, driven by a fake clock."""

from __future__ import annotations

import pytest

from shared.breaker import BreakerSettings, CircuitBreaker


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def breaker(clock: FakeClock, **settings: float) -> CircuitBreaker:
    return CircuitBreaker(BreakerSettings(**settings), clock=clock)  # type: ignore[arg-type]


def feed(cb: CircuitBreaker, outcomes: str) -> None:
    """Record outcomes spelt as a string: 'S' a success, 'F' a failure."""
    for outcome in outcomes:
        assert cb.allow()
        cb.record(outcome == "S")


def tripped(clock: FakeClock, **settings: float) -> CircuitBreaker:
    cb = breaker(clock, **settings)
    feed(cb, "FFFFF")
    assert cb.state == "open"
    return cb


def test_stays_closed_below_min_samples_even_when_every_call_fails() -> None:
    cb = breaker(FakeClock(), min_samples=5)
    feed(cb, "FFFF")
    assert cb.state == "closed"
    assert cb.allow()
    assert cb.retry_after() == 0


def test_opens_when_the_failure_rate_is_reached() -> None:
    cb = breaker(FakeClock(), failure_rate=0.5, min_samples=5)
    feed(cb, "SSSFF")
    assert cb.state == "closed"  # 2 of 5
    feed(cb, "F")
    assert cb.state == "open"  # 3 of 6: exactly the rate opens
    assert not cb.allow()


def test_denies_while_open_with_a_shrinking_retry_after() -> None:
    clock = FakeClock()
    cb = tripped(clock, open_seconds=30)
    assert cb.retry_after() == pytest.approx(30)
    clock.advance(10)
    assert not cb.allow()
    assert cb.retry_after() == pytest.approx(20)
    clock.advance(19.5)
    assert not cb.allow()
    assert cb.state == "open"
    assert cb.retry_after() == pytest.approx(0.5)


def test_outcomes_of_calls_let_through_before_it_opened_are_ignored() -> None:
    clock = FakeClock()
    cb = tripped(clock, open_seconds=30)
    clock.advance(10)
    cb.record(True)
    cb.record(False)
    assert cb.state == "open"
    assert cb.retry_after() == pytest.approx(20)  # a late failure does not extend it


def test_half_open_after_open_seconds_lets_exactly_one_probe_through() -> None:
    clock = FakeClock()
    cb = tripped(clock, open_seconds=30)
    clock.advance(30)
    assert cb.state == "half_open"
    assert cb.retry_after() == 0
    assert cb.allow()
    assert not cb.allow()
    assert not cb.allow()


def test_half_open_probes_bounds_concurrent_probes() -> None:
    clock = FakeClock()
    cb = tripped(clock, open_seconds=30, half_open_probes=2)
    clock.advance(30)
    assert [cb.allow() for _ in range(3)] == [True, True, False]


def test_a_probe_success_closes_it_with_an_empty_window() -> None:
    clock = FakeClock()
    cb = tripped(clock, open_seconds=30, min_samples=5)
    clock.advance(30)
    assert cb.allow()
    cb.record(True)
    assert cb.state == "closed"
    feed(cb, "FFFF")  # the five old failures are gone: four new ones are below min_samples
    assert cb.state == "closed"


def test_a_probe_failure_opens_it_for_another_open_seconds() -> None:
    clock = FakeClock()
    cb = tripped(clock, open_seconds=30)
    clock.advance(45)
    assert cb.allow()
    cb.record(False)
    assert cb.state == "open"
    assert not cb.allow()
    assert cb.retry_after() == pytest.approx(30)
    clock.advance(30)
    assert cb.allow()


def test_half_open_ignores_outcomes_when_no_probe_is_in_flight() -> None:
    clock = FakeClock()
    cb = tripped(clock, open_seconds=30)
    clock.advance(30)
    cb.record(True)  # a straggler from before it opened, not a probe
    assert cb.state == "half_open"


def test_a_released_probe_slot_is_free_again_and_counts_no_outcome() -> None:
    clock = FakeClock()
    cb = tripped(clock, open_seconds=30)
    clock.advance(30)
    assert cb.allow()
    cb.release()
    assert cb.state == "half_open"
    assert cb.allow()
    assert not cb.allow()


def test_a_probe_never_recorded_lapses_after_open_seconds() -> None:
    clock = FakeClock()
    cb = tripped(clock, open_seconds=30)
    clock.advance(30)
    assert cb.allow()
    clock.advance(29)
    assert not cb.allow()
    clock.advance(1)
    assert cb.allow()


def test_the_window_slides_so_old_failures_age_out_by_count() -> None:
    cb = breaker(FakeClock(), window=4, min_samples=4, failure_rate=0.6)
    feed(cb, "FFSSFF")  # 4 of 6 overall, but the window holds S S F F: 2 of 4
    assert cb.state == "closed"
    feed(cb, "F")  # S F F F
    assert cb.state == "open"


def test_recent_failures_trip_it_after_a_long_good_run() -> None:
    cb = breaker(FakeClock(), window=4, min_samples=4, failure_rate=0.75)
    feed(cb, "S" * 50 + "FFF")
    assert cb.state == "open"


def test_on_change_reports_every_transition_once() -> None:
    clock = FakeClock()
    seen: list[tuple[str, str]] = []
    cb = CircuitBreaker(
        BreakerSettings(open_seconds=30),
        clock=clock,
        on_change=lambda old, new: seen.append((old, new)),
    )
    feed(cb, "SFFFF")
    assert not cb.allow()
    clock.advance(30)
    assert cb.state == "half_open"
    assert cb.state == "half_open"
    assert cb.allow()
    cb.record(False)
    clock.advance(30)
    assert cb.allow()
    cb.record(True)
    assert seen == [
        ("closed", "open"),
        ("open", "half_open"),
        ("half_open", "open"),
        ("open", "half_open"),
        ("half_open", "closed"),
    ]


def test_on_change_sees_the_new_state_in_place() -> None:
    states: list[str] = []
    cb = CircuitBreaker(BreakerSettings(), clock=FakeClock())
    cb.on_change = lambda old, new: states.append(cb.state)
    feed(cb, "FFFFF")
    assert states == ["open"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"window": 0},
        {"min_samples": 0},
        {"window": 4, "min_samples": 5},
        {"failure_rate": 0},
        {"failure_rate": 1.5},
        {"open_seconds": 0},
        {"half_open_probes": 0},
    ],
)
def test_nonsense_settings_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        BreakerSettings(**kwargs)  # type: ignore[arg-type]
