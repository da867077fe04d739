"""Standing instructions: feedback that recurs across tickets of a category becomes one.

When a reviewer's `response` on a draft says much what earlier feedback on other tickets of
the same category said (at least `SIMILAR` of their terms in common, `shared.similarity`), and
that makes `RECURS` tickets or more, the newest wording becomes an active instruction for the
category, with the feedback it came from as its evidence. Reviewers see every instruction on
the inbox's instructions page and beside each draft that was given it, and edit or remove it
there; they may also write one. A removed instruction is kept (status `removed`) so the same
feedback does not bring it back; feedback like an active one adds to its evidence. The active
ones are what the drafter is given (`shared.guidance`, published by the inbox).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from shared.guidance import Guidance, Instruction
from shared.inbox import CATEGORIES
from shared.similarity import overlap

from .errors import Invalid, NotFound
from .tables import DecisionRow, InstructionRow, ItemRow, as_utc, now

RECURS = 2  # tickets whose feedback says the same thing before it stands
SIMILAR = 0.5  # the share of terms two pieces of feedback have in common to say the same
MAX_CHARS = 500
MAX_ID = 2**31 - 1  # the column's range (an id beyond it is no instruction, not an error)
LOOKBACK = 500  # the newest feedback of a category compared with a new one


def learn(session: Session, item: ItemRow, feedback: str, reviewer: str, at: dt.datetime) -> None:
    """Called in the transaction that records a `response` decision on `item`."""
    category = item.category
    if category not in CATEGORIES or not item.ticket_id:
        return  # a supervisor notification, or an item about no ticket
    known = session.exec(select(InstructionRow).where(InstructionRow.category == category)).all()
    evidence = {
        "ticket": item.ticket_id,
        "item_id": item.id,
        "reviewer": reviewer,
        "feedback": feedback,
        "at": at.isoformat(),
    }
    for row in known:
        if overlap(row.text, feedback) >= SIMILAR or any(
            overlap(e.get("feedback", ""), feedback) >= SIMILAR for e in row.evidence
        ):
            if row.status == "active" and all(e.get("item_id") != item.id for e in row.evidence):
                row.evidence = [*row.evidence, evidence]
                session.add(row)
            return  # it stands already, or reviewers removed it
    earlier = session.exec(
        select(DecisionRow, ItemRow)
        .where(
            DecisionRow.type == "response",
            DecisionRow.category == category,
            col(DecisionRow.item_id) == col(ItemRow.id),
            col(ItemRow.ticket_id) != item.ticket_id,
        )
        .order_by(col(DecisionRow.id).desc())
        .limit(LOOKBACK)
    ).all()
    alike = [(d, i) for d, i in earlier if overlap(d.feedback or "", feedback) >= SIMILAR]
    tickets = {i.ticket_id for _, i in alike} | {item.ticket_id}
    if len(tickets) < RECURS:
        return
    session.add(
        InstructionRow(
            category=category,
            text=feedback[:MAX_CHARS],
            evidence=[
                *(
                    {
                        "ticket": i.ticket_id,
                        "item_id": i.id,
                        "reviewer": d.reviewer,
                        "feedback": d.feedback,
                        "at": as_utc(d.decided_at).isoformat(),  # type: ignore[union-attr]
                    }
                    for d, i in reversed(alike)
                ),
                evidence,
            ],
            created_at=at,
            updated_at=at,
        )
    )


def instruction_json(row: InstructionRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "category": row.category,
        "text": row.text,
        "status": row.status,
        "origin": row.origin,
        "evidence": row.evidence,
        "tickets": sorted({str(e.get("ticket")) for e in row.evidence if e.get("ticket")}),
        "created_at": as_utc(row.created_at).isoformat(),  # type: ignore[union-attr]
        "updated_at": as_utc(row.updated_at).isoformat(),  # type: ignore[union-attr]
        "updated_by": row.updated_by,
    }


def list_instructions(engine: Engine, *, removed: bool = False) -> list[dict[str, Any]]:
    with Session(engine, expire_on_commit=False) as session:
        query = select(InstructionRow).order_by(
            col(InstructionRow.category), col(InstructionRow.id)
        )
        if not removed:
            query = query.where(InstructionRow.status == "active")
        return [instruction_json(r) for r in session.exec(query).all()]


def _text(text: Any) -> str:
    if not isinstance(text, str) or not text.strip():
        raise Invalid("an instruction needs its text")
    cleaned = " ".join(text.split())
    if len(cleaned) > MAX_CHARS:
        raise Invalid(f"an instruction is at most {MAX_CHARS} characters")
    return cleaned


def write_instruction(engine: Engine, category: Any, text: Any, reviewer: str) -> dict[str, Any]:
    """A reviewer's own instruction for `category`."""
    if category not in CATEGORIES:
        raise Invalid(f"category must be one of {', '.join(CATEGORIES)}")
    at = now()
    row = InstructionRow(
        category=category,
        text=_text(text),
        origin="written",
        created_at=at,
        updated_at=at,
        updated_by=reviewer,
    )
    with Session(engine, expire_on_commit=False) as session:
        session.add(row)
        session.commit()
        return instruction_json(row)


def change_instruction(
    engine: Engine, instruction_id: int, reviewer: str, *, text: Any = None, remove: bool = False
) -> dict[str, Any]:
    """Edit an active instruction's text, or remove it."""
    if not 1 <= instruction_id <= MAX_ID:
        raise NotFound(f"no standing instruction {instruction_id}")
    with Session(engine, expire_on_commit=False) as session:
        row = session.get(InstructionRow, instruction_id)
        if row is None or row.status != "active":
            raise NotFound(f"no standing instruction {instruction_id}")
        if remove:
            row.status = "removed"
        else:
            row.text = _text(text)
        row.updated_at = now()
        row.updated_by = reviewer
        session.add(row)
        session.commit()
        return instruction_json(row)


def guidance(engine: Engine) -> Guidance:
    """What the drafter is given: the active instructions."""
    with Session(engine, expire_on_commit=False) as session:
        rows = session.exec(
            select(InstructionRow)
            .where(InstructionRow.status == "active")
            .order_by(col(InstructionRow.category), col(InstructionRow.id))
        ).all()
        return Guidance(
            instructions=[Instruction(id=r.id or 0, category=r.category, text=r.text) for r in rows]
        )
