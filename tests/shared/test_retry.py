from __future__ import annotations

import random

import pytest

from shared.retry import RetryPolicy


def test_delays_grow_exponentially_and_never_fall_below_the_base() -> None:
    policy = RetryPolicy(initial=1, multiplier=2, maximum=60, jitter=0.5)
    rng = random.Random(7)
    for attempt, base in [(1, 1), (2, 2), (3, 4), (4, 8)]:
        for _ in range(50):
            delay = policy.delay(attempt, rng=rng)
            assert base <= delay <= base * 1.5


def test_delays_are_bounded_even_for_huge_attempt_numbers() -> None:
    policy = RetryPolicy(initial=1, multiplier=2, maximum=30, jitter=0.2)
    assert policy.delay(10_000) == 30
    assert policy.base(10_000) == 30


def test_jitter_spreads_retries() -> None:
    policy = RetryPolicy(initial=1, jitter=0.5)
    rng = random.Random(1)
    assert len({round(policy.delay(3, rng=rng), 6) for _ in range(20)}) > 10


def test_retry_after_wins_when_longer_but_stays_bounded() -> None:
    policy = RetryPolicy(initial=1, maximum=20, jitter=0)
    assert policy.delay(1, retry_after=7) == 7
    assert policy.delay(1, retry_after=0.1) == 1
    assert policy.delay(1, retry_after=3600) == 20


@pytest.mark.parametrize(
    "kwargs", [{"initial": 0}, {"multiplier": 0.5}, {"initial": 5, "maximum": 1}, {"jitter": 2}]
)
def test_nonsense_policies_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**kwargs)
