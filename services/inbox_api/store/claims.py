"""Claims: two reviewers never work the same draft unknowingly.

Opening a waiting item (its page, `POST /api/items/{id}/claim`, `desk inbox claim`) claims its
conversation for `DESK_CLAIM_SECONDS` (300); the page renews the claim while it is open, and the
holder may release it. Others see who holds it. Deciding an item someone else holds is refused
(409, naming them) unless the decision says `take_over`, which ends their claim in the same
transaction; a decision ends the claim. A claim past its time holds nobody: the next reviewer
who claims the item records it expired. Every claim, take-over, release, decision and expiry is
a row of `inbox_claim_events`, the claims' trail.

One row a thread in `inbox_claims`: the draft's next version (after feedback) stays with the
reviewer working on the conversation.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from .errors import Conflict, NotFound
from .tables import ClaimEventRow, ClaimRow, ItemRow, as_utc, now


class Claimed(Conflict):
    """409: someone else holds the item's conversation."""

    def __init__(self, row: ClaimRow) -> None:
        until = as_utc(row.until)
        assert until is not None
        self.reviewer, self.until = row.reviewer, until
        super().__init__(
            f"{row.reviewer} is working on this until {until:%H:%M:%S} UTC; take it over to decide"
        )


def holder(session: Session, thread: str, at: dt.datetime) -> ClaimRow | None:
    """The live claim on `thread` (None: nobody holds it, or the claim ran out)."""
    row = session.get(ClaimRow, thread)
    if row is None or as_utc(row.until) <= at:  # type: ignore[operator]
        return None
    return row


def _event(
    session: Session,
    row: ItemRow,
    reviewer: str,
    action: str,
    at: dt.datetime,
    previous: str | None = None,
) -> None:
    session.add(
        ClaimEventRow(
            thread=row.thread,
            item_id=row.id,
            reviewer=reviewer,
            action=action,
            previous=previous,
            at=at,
        )
    )


def _displace(
    session: Session,
    row: ItemRow,
    current: ClaimRow,
    reviewer: str,
    take_over: bool,
    at: dt.datetime,
) -> str | None:
    """Before `reviewer` acts on `row`: how the claim `current` ends, recorded (`expired`, or
    `taken over` from someone else's live claim: `Claimed` unless `take_over`); None when it is
    `reviewer`'s own live claim."""
    until = as_utc(current.until)
    assert until is not None
    if until <= at:
        _event(session, row, current.reviewer, "expired", until)
        return "expired"
    if current.reviewer == reviewer:
        return None
    if not take_over:
        raise Claimed(current)
    _event(session, row, reviewer, "taken over", at, previous=current.reviewer)
    return "taken over"


def _hold(
    session: Session, row: ItemRow, reviewer: str, seconds: float, take_over: bool, at: dt.datetime
) -> ClaimRow:
    """Claim or renew `row`'s thread for `reviewer` in `session` (not committed)."""
    current = session.get(ClaimRow, row.thread)
    if current is None:
        current = ClaimRow(thread=row.thread, item_id=row.id, reviewer=reviewer, since=at, until=at)
        _event(session, row, reviewer, "claimed", at)
    else:
        ended = _displace(session, row, current, reviewer, take_over, at)
        if ended == "expired":
            _event(session, row, reviewer, "claimed", at)
        if ended is not None:
            current.reviewer, current.since = reviewer, at
    current.item_id, current.until = row.id, at + dt.timedelta(seconds=seconds)
    session.add(current)
    return current


def claim(
    engine: Engine, item_id: str, reviewer: str, seconds: float, *, take_over: bool = False
) -> dict[str, Any]:
    """Claim (or renew the claim on) a waiting item for `reviewer`; `Claimed` when someone
    else holds it and `take_over` is not set."""
    for attempt in (1, 2):  # two first claims at once: one inserts, the other sees it
        with Session(engine, expire_on_commit=False) as session:
            row = session.get(ItemRow, item_id)
            if row is None:
                raise NotFound(f"no item {item_id}")
            if row.status != "waiting":
                raise Conflict(f"this item is {row.status}: there is nothing to claim")
            held = _hold(session, row, reviewer, seconds, take_over, now())
            try:
                session.commit()
            except IntegrityError:
                if attempt == 2:
                    raise Conflict("this item was claimed a moment ago") from None
                continue
            return claim_json(held)
    raise AssertionError("unreachable")


def release(engine: Engine, item_id: str, reviewer: str) -> bool:
    """`reviewer` lets go of the item's conversation; False if they did not hold it."""
    with Session(engine) as session:
        row = session.get(ItemRow, item_id)
        if row is None:
            raise NotFound(f"no item {item_id}")
        at = now()
        held = holder(session, row.thread, at)
        if held is None or held.reviewer != reviewer:
            return False
        session.delete(held)
        _event(session, row, reviewer, "released", at)
        session.commit()
        return True


def before_decision(
    session: Session, row: ItemRow, reviewer: str, take_over: bool, at: dt.datetime
) -> None:
    """In a decision's transaction: refuse it (`Claimed`) if someone else holds the item and
    it does not take over; record a take-over; end the claim, the decision being made."""
    current = session.get(ClaimRow, row.thread)
    if current is None:
        return
    _displace(session, row, current, reviewer, take_over, at)
    session.delete(current)
    _event(session, row, reviewer, "decided", at)


def live(session: Session, threads: list[str], at: dt.datetime) -> dict[str, ClaimRow]:
    """The live claims among `threads`, by thread (for a list page)."""
    if not threads:
        return {}
    rows = session.exec(
        select(ClaimRow).where(col(ClaimRow.thread).in_(threads), col(ClaimRow.until) > at)
    ).all()
    return {r.thread: r for r in rows}


def trail(session: Session, thread: str) -> list[dict[str, Any]]:
    """The conversation's claims trail, oldest first."""
    rows = session.exec(
        select(ClaimEventRow).where(ClaimEventRow.thread == thread).order_by(col(ClaimEventRow.id))
    ).all()
    return [
        {
            "item_id": r.item_id,
            "reviewer": r.reviewer,
            "action": r.action,
            "previous": r.previous,
            "at": as_utc(r.at).isoformat(),  # type: ignore[union-attr]
        }
        for r in rows
    ]


def claim_json(row: ClaimRow) -> dict[str, Any]:
    return {
        "reviewer": row.reviewer,
        "item_id": row.item_id,
        "since": as_utc(row.since).isoformat(),  # type: ignore[union-attr]
        "until": as_utc(row.until).isoformat(),  # type: ignore[union-attr]
    }
