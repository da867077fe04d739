"""Service levels: a target time to a decision by priority and/or category, and where an item
stands against it (pure; the projection stores the times, the scan escalates on them).

The clock of a round starts when its first draft reaches the inbox: a redraft after feedback
keeps the time the round has waited already. Of the targets that apply to an item (its
priority's, its category's), the smaller wins. An item `nears` its target after `near` of it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

Standing = Literal["ok", "near", "past"]
THRESHOLDS: tuple[Literal["near", "past"], ...] = ("near", "past")


@dataclass(frozen=True)
class Targets:
    minutes: Mapping[str, float] = field(default_factory=dict)  # priority or category: minutes
    near: float = 0.75

    def seconds_for(self, priority: str | None, category: str | None) -> float | None:
        """The target in seconds (an item without a priority is a normal one), or None."""
        keys = (priority or "normal", category)
        found = [self.minutes[k] for k in keys if k and k in self.minutes]
        return min(found) * 60 if found else None

    def times(
        self, since: dt.datetime, priority: str | None, category: str | None
    ) -> tuple[dt.datetime | None, dt.datetime | None]:
        """(near_at, due_at) for a round waiting since `since`; (None, None) without a target."""
        seconds = self.seconds_for(priority, category)
        if seconds is None:
            return None, None
        return (
            since + dt.timedelta(seconds=seconds * self.near),
            since + dt.timedelta(seconds=seconds),
        )


def standing(
    status: str, near_at: dt.datetime | None, due_at: dt.datetime | None, now: dt.datetime
) -> Standing | None:
    """Where a waiting item stands against its target; None when it has none or waits no more."""
    if status != "waiting" or due_at is None or near_at is None:
        return None
    if now >= due_at:
        return "past"
    return "near" if now >= near_at else "ok"
