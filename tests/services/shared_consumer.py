"""A consumer on `work.test.>` with a given handler, for tests that need dead letters."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from shared import subjects
from shared.consumer import Consumer
from shared.retry import RetryPolicy


def consumer_for(handler: Callable[[Any], Awaitable[None]]) -> Consumer:
    return Consumer(
        name="test",
        stream=subjects.WORK,
        subjects=(subjects.work_for("test"),),
        handler=handler,
        retry=RetryPolicy(initial=0.1),
        ack_wait=2.0,
    )
