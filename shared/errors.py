"""The three kinds of failure a handler may raise, and what the consumer runtime does with each.

- `TransientError`: retry later with bounded backoff (429, 5xx, timeouts, a broker hiccup).
  Its kind `Unavailable` says a dependency is down (the database, a channel whose breaker is
  open): the runtime holds the message and tries again in place, spending no attempt, so an
  outage of any length ends in the work being done, never in a dead letter.
- `PermanentError`: retrying cannot help; dead-letter now (bad payload, ticket not found).
- `BusinessReject`: not an error at all; acknowledge, record the outcome, never retry.

Foreign errors are mapped to these at the edge; code branches on the class, never on message text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


class DeskError(Exception):
    """Base class of the three outcome errors."""


class TransientError(DeskError):
    """Try again later. `retry_after` (seconds) honours a downstream's Retry-After."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Unavailable(TransientError):
    """A dependency is down: wait for it (`retry_after` when it says how long), then try again.

    Not a failed attempt: the consumer runtime keeps the delivery (sending in-progress
    heartbeats) and runs the handler again, so the broker's delivery count is not spent.
    """


class PermanentError(DeskError):
    """Retrying cannot succeed: the message goes to the dead-letter stream on this attempt."""


class BusinessReject(DeskError):
    """The work is refused by a business rule (closed ticket, zero-value order).

    `outcome` is a short machine-readable label recorded and counted by the runtime.
    """

    def __init__(self, message: str, *, outcome: str = "rejected") -> None:
        super().__init__(message)
        self.outcome = outcome


def first_error(exc: ValidationError, default: str) -> str:
    """`<where>: <what>` for the first validation error (`default` where it is the whole
    thing); never the input, which may be a secret."""
    errors = exc.errors()
    if not errors:
        return f"{default}: invalid"
    first = errors[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or default
    return f"{where}: {first.get('msg', 'invalid')}"
