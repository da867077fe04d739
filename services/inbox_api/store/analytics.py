"""Review analytics: what reviewers did with the drafts, overall, per category and per UTC day,
over the last `days` x 24 hours (`/api/stats` under `review`, the `/stats` page, the report).

Every group (overall, a category, a day) has the same figures:

- `decisions`, the count of each kind (`accept`, `edit`, `response`, `ignore`), and `rates`:
  each kind's share of the decisions;
- `unedited_share`: accepts / (accepts + edits) on reply drafts whose reply went out (`sent`, or
  still `sending`: `WENT_OUT`), the share of the replies sent as the model wrote them; an
  approved reply the sender withdrew (the ticket changed first), that failed or that a newer
  version superseded never reached the customer and counts neither way; `replies_sent`: how
  many went out;
- `edit_ratio`: over the edits of reply drafts, the mean of 1 - `difflib.SequenceMatcher`'s
  ratio between the draft and the text sent, character by character (0: unchanged, 1: nothing
  in common); `changed_chars`: the mean count of characters the same comparison removed from
  the draft plus those it added; `edits_measured`: how many edits they are over;
- `time_to_decision_seconds`: the median and the 90th percentile (linear between ranks) of the
  decision's time minus the creation of the item version it decided.

A figure with nothing to measure is None. Supervisor notifications (`notify_supervisor`, the
"escalation" category) count in the decisions, rates and times, but have no draft: they are
left out of the unedited share and the edit distance.

Computed in Python over one query (the window's decisions joined with their items), so SQLite
and PostgreSQL give the same figures. Comparing a draft with its sent text is quadratic in the
worst case, so each comparison is remembered (by a digest of both texts, a bounded number).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, get_args

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import col

from shared.inbox import SEND_REPLY, DecisionType
from shared.similarity import edit_distance

from .errors import Invalid
from .tables import DecisionRow, ItemRow, as_utc, now

KINDS: tuple[str, ...] = get_args(DecisionType)  # accept, edit, response, ignore
# an approved reply's item statuses while it is being sent and once it is: not withdrawn, failed
# or superseded (the auto-send evidence counts the same replies)
WENT_OUT = ("sending", "sent")
REVIEW_DAYS = 30
MAX_REVIEW_DAYS = 365


@dataclass(frozen=True)
class Reviewed:
    """One decision, as the figures need it."""

    kind: str
    category: str
    decided_at: dt.datetime
    seconds: float | None  # from the item version's creation to the decision
    on_draft: bool  # a decision on a reply draft (not on a supervisor notification)
    edit: tuple[float, int] | None = None  # an edited draft's (edit ratio, changed characters)
    went_out: bool = True  # its item's status is in WENT_OUT


def review_days(text: str | None) -> int:
    """The window a request asks for (`?days=N`): REVIEW_DAYS when it names none; Invalid
    unless a whole number from 1 to MAX_REVIEW_DAYS."""
    if text is None or text == "":
        return REVIEW_DAYS
    try:
        days = int(text)
    except ValueError:
        raise Invalid(f"days must be a whole number from 1 to {MAX_REVIEW_DAYS}") from None
    if not 1 <= days <= MAX_REVIEW_DAYS:
        raise Invalid(f"days must be from 1 to {MAX_REVIEW_DAYS}, not {days}")
    return days


def review(
    engine: Engine, days: int = REVIEW_DAYS, at: dt.datetime | None = None
) -> dict[str, Any]:
    """The figures of the decisions made in the `days` x 24 hours before `at` (now)."""
    if not 1 <= days <= MAX_REVIEW_DAYS:
        raise Invalid(f"days must be from 1 to {MAX_REVIEW_DAYS}, not {days}")
    until = at or now()
    since = until - dt.timedelta(days=days)
    query = (
        select(
            col(DecisionRow.type),
            col(DecisionRow.category),
            col(DecisionRow.decided_at),
            col(DecisionRow.model_draft),
            col(DecisionRow.final_text),
            col(ItemRow.action),
            col(ItemRow.created_at),
            col(ItemRow.status),
        )
        .join(ItemRow, col(ItemRow.id) == col(DecisionRow.item_id), isouter=True)
        .where(col(DecisionRow.decided_at) >= since, col(DecisionRow.decided_at) <= until)
    )
    with engine.connect() as connection:
        rows = connection.execute(query).all()
    reviewed = []
    for kind, category, decided, draft, final, action, created, status in rows:
        decided_at, created_at = as_utc(decided), as_utc(created)
        assert decided_at is not None
        on_draft = action == SEND_REPLY
        reviewed.append(
            Reviewed(
                kind=kind,
                category=category or "none",
                decided_at=decided_at,
                seconds=(decided_at - created_at).total_seconds() if created_at else None,
                on_draft=on_draft,
                edit=edit_distance(draft, final) if on_draft and kind == "edit" else None,
                went_out=status in WENT_OUT,
            )
        )
    return figures(reviewed, days, since, until)


def figures(
    reviewed: list[Reviewed], days: int, since: dt.datetime, until: dt.datetime
) -> dict[str, Any]:
    """The `review` document: the window, overall, by category (by name), and by day (every
    UTC date the window touches, oldest first; the first and the last are partial days)."""
    by_category: dict[str, list[Reviewed]] = {}
    by_day: dict[dt.date, list[Reviewed]] = {}
    for r in reviewed:
        by_category.setdefault(r.category, []).append(r)
        by_day.setdefault(r.decided_at.astimezone(dt.UTC).date(), []).append(r)
    first, last = since.astimezone(dt.UTC).date(), until.astimezone(dt.UTC).date()
    dates = [first + dt.timedelta(days=n) for n in range((last - first).days + 1)]
    return {
        "days": days,
        "since": since.isoformat(),
        "until": until.isoformat(),
        "overall": summary(reviewed),
        "by_category": {name: summary(rows) for name, rows in sorted(by_category.items())},
        "by_day": [{"date": d.isoformat(), **summary(by_day.get(d, []))} for d in dates],
    }


def summary(reviewed: Iterable[Reviewed]) -> dict[str, Any]:
    """One group's figures (see the module's docstring)."""
    rows = list(reviewed)
    counts = {kind: sum(1 for r in rows if r.kind == kind) for kind in KINDS}
    sent = [r for r in rows if r.on_draft and r.kind in ("accept", "edit") and r.went_out]
    accepted = sum(1 for r in sent if r.kind == "accept")
    edits = [r.edit for r in rows if r.edit is not None]
    seconds = sorted(r.seconds for r in rows if r.seconds is not None)
    return {
        "decisions": len(rows),
        **counts,
        "rates": {kind: _share(n, len(rows)) for kind, n in counts.items()},
        "unedited_share": _share(accepted, len(sent)),
        "replies_sent": len(sent),
        "edit_ratio": round(sum(e[0] for e in edits) / len(edits), 4) if edits else None,
        "changed_chars": round(sum(e[1] for e in edits) / len(edits), 1) if edits else None,
        "edits_measured": len(edits),
        "time_to_decision_seconds": {
            "median": _rounded(percentile(seconds, 50)),
            "p90": _rounded(percentile(seconds, 90)),
        },
    }


def percentile(ordered: list[float], p: float) -> float | None:
    """The `p`th percentile of sorted values, linear between the closest ranks (numpy's
    default); None for no values."""
    if not ordered:
        return None
    rank = (len(ordered) - 1) * p / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
