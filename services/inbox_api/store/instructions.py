"""Standing instructions: feedback that recurs across tickets of a category becomes one.

When a reviewer's `response` on a draft says much what earlier feedback on other tickets of
the same category said (at least `SIMILAR` of their terms in common, `shared.similarity`), and
that makes `RECURS` tickets or more, the newest wording becomes an active instruction for the
category, with the feedback it came from as its evidence. Reviewers see every instruction on
the inbox's instructions page and beside each draft that was given it, and edit or remove it
there; they may also write one. A removed instruction is kept (status `removed`) so the same
feedback does not bring it back; feedback like an active one adds to its evidence. The active
ones are what the drafter is given (`shared.standing`, published by the inbox).

Auto-sent replies follow them with no person reading the reply, so while auto-send is on for
any category (a draft is shown every category's instructions), a new or changed instruction
takes effect only once an admin (`DESK_ADMINS`) approves it: a new one waits as `pending`, an
edit waits as `proposed` while the approved text stays in force, and only instructions an admin
approved reach drafts. The inbox checks it
again when it auto-sends (`approved_ids`): a draft that says it was given any other text waits
for a person, and the auto decision records the ids of the instructions it was given. Removing
one takes effect at once, so a bad instruction can always be pulled.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from shared.inbox import CATEGORIES
from shared.similarity import overlap
from shared.standing import Instruction, StandingInstructions

from .autosend import enabled, on_for
from .errors import Conflict, Invalid, NotFound
from .tables import DecisionRow, InstructionRow, ItemRow, as_utc, now

RECURS = 2  # tickets whose feedback says the same thing before it stands
SIMILAR = 0.5  # the share of terms two pieces of feedback have in common to say the same
MAX_CHARS = 500
MAX_ID = 2**31 - 1  # the column's range (an id beyond it is no instruction, not an error)
LOOKBACK = 500  # the newest feedback of a category compared with a new one
LIVE = ("active", "pending")  # listed and changeable; `removed` is kept only as history


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
            if row.status in LIVE and all(e.get("item_id") != item.id for e in row.evidence):
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
            status="pending" if guarded(session) else "active",
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
    approved = as_utc(row.approved_at)
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
        "approved_by": row.approved_by,
        "approved_at": approved.isoformat() if approved else None,
        "proposed": row.proposed,
    }


def list_instructions(engine: Engine, *, removed: bool = False) -> list[dict[str, Any]]:
    with Session(engine, expire_on_commit=False) as session:
        query = select(InstructionRow).order_by(
            col(InstructionRow.category), col(InstructionRow.id)
        )
        if not removed:
            query = query.where(col(InstructionRow.status).in_(LIVE))
        return [instruction_json(r) for r in session.exec(query).all()]


def _text(text: Any) -> str:
    if not isinstance(text, str) or not text.strip():
        raise Invalid("an instruction needs its text")
    cleaned = " ".join(text.split())
    if len(cleaned) > MAX_CHARS:
        raise Invalid(f"an instruction is at most {MAX_CHARS} characters")
    return cleaned


def write_instruction(
    engine: Engine, category: Any, text: Any, reviewer: str, *, admin: bool = False
) -> dict[str, Any]:
    """A reviewer's own instruction for `category`: in force at once, unless auto-send is on
    (`guarded`) and `reviewer` is no admin (then it waits for one)."""
    if category not in CATEGORIES:
        raise Invalid(f"category must be one of {', '.join(CATEGORIES)}")
    cleaned = _text(text)
    at = now()
    with Session(engine, expire_on_commit=False) as session:
        held = not admin and guarded(session)
        row = InstructionRow(
            category=category,
            text=cleaned,
            status="pending" if held else "active",
            origin="written",
            created_at=at,
            updated_at=at,
            updated_by=reviewer,
            approved_by=reviewer if admin else None,
            approved_at=at if admin else None,
        )
        session.add(row)
        session.commit()
        return instruction_json(row)


def _live(session: Session, instruction_id: int) -> InstructionRow:
    row = session.get(InstructionRow, instruction_id) if 1 <= instruction_id <= MAX_ID else None
    if row is None or row.status not in LIVE:
        raise NotFound(f"no standing instruction {instruction_id}")
    return row


def change_instruction(
    engine: Engine,
    instruction_id: int,
    reviewer: str,
    *,
    text: Any = None,
    remove: bool = False,
    admin: bool = False,
) -> dict[str, Any]:
    """Edit an instruction's text, or remove it. While auto-send is on (`guarded`), a
    non-admin's edit is proposed (the approved text stays in force until an admin approves)."""
    with Session(engine, expire_on_commit=False) as session:
        row = _live(session, instruction_id)
        at = now()
        if remove:
            row.status, row.proposed = "removed", None
        else:
            cleaned = _text(text)
            if admin:
                row.text, row.proposed, row.status = cleaned, None, "active"
                row.approved_by, row.approved_at = reviewer, at
            elif guarded(session):  # it waits for an admin
                if row.status == "pending":
                    row.text = cleaned
                else:
                    row.proposed = None if cleaned == row.text else cleaned
            else:
                row.text, row.proposed, row.status = cleaned, None, "active"
                row.approved_by = row.approved_at = None
        row.updated_at = at
        row.updated_by = reviewer
        session.add(row)
        session.commit()
        return instruction_json(row)


def approve_instruction(engine: Engine, instruction_id: int, admin: str) -> dict[str, Any]:
    """An admin approves an instruction as it now reads, or the edit proposed for it."""
    with Session(engine, expire_on_commit=False) as session:
        row = _live(session, instruction_id)
        at = now()
        if row.proposed is not None:
            row.text, row.proposed = row.proposed, None
        elif row.approved_by is not None and row.status == "active":
            return instruction_json(row)  # approved already: the same answer again
        row.status, row.approved_by, row.approved_at = "active", admin, at
        row.updated_at, row.updated_by = at, admin
        session.add(row)
        session.commit()
        return instruction_json(row)


def reject_instruction(engine: Engine, instruction_id: int, admin: str) -> dict[str, Any]:
    """An admin turns down what waits: a pending instruction is removed, a proposed edit
    dropped (the approved text stays)."""
    with Session(engine, expire_on_commit=False) as session:
        row = _live(session, instruction_id)
        if row.status == "pending":
            row.status = "removed"
        elif row.proposed is not None:
            row.proposed = None
        else:
            raise Conflict(f"nothing of standing instruction {instruction_id} waits for approval")
        row.updated_at, row.updated_by = now(), admin
        session.add(row)
        session.commit()
        return instruction_json(row)


def guarded(session: Session) -> bool:
    """Whether a new or changed instruction waits for an admin: while auto-send is on for any
    category. Every draft is shown every category's instructions (the model picks the category
    as it drafts), so an instruction of any category can steer an auto-sent reply."""
    return any(enabled(session, category) for category in CATEGORIES)


def approved_ids(session: Session, item: ItemRow) -> list[int] | None:
    """The ids of the standing instructions in force when `item` is auto-sent: every approved
    one, of every category (a draft is shown them all); None when the draft says it was given
    one no admin approved as it reads now (it waits for a person). Checked in the transaction
    that auto-sends it."""
    rows = session.exec(
        select(InstructionRow)
        .where(
            InstructionRow.status == "active",
            col(InstructionRow.approved_by).is_not(None),
        )
        .order_by(col(InstructionRow.id))
    ).all()
    approved = {r.text for r in rows}
    if any(text not in approved for text in item.instructions or []):
        return None
    return [int(r.id or 0) for r in rows]


def standing_instructions(engine: Engine) -> StandingInstructions:
    """What the drafter is given: the active instructions; while auto-send is on for any
    category (`guarded`), only those an admin approved."""
    held = on_for(engine)
    with Session(engine, expire_on_commit=False) as session:
        rows = session.exec(
            select(InstructionRow)
            .where(InstructionRow.status == "active")
            .order_by(col(InstructionRow.category), col(InstructionRow.id))
        ).all()
        return StandingInstructions(
            instructions=[
                Instruction(id=r.id or 0, category=r.category, text=r.text)
                for r in rows
                if not held or r.approved_by is not None
            ]
        )
