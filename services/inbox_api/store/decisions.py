"""Decisions: one per item version, enforced by a UNIQUE constraint, so a double click decides
once; recorded before they are published, and published again until the bus has them.

A decision posted again as it was recorded (same version, kind, reviewer and text; a browser or
client retrying after its connection dropped) is answered with the recorded one, not a 409:
the reviewer learns that what they asked for was taken, and nothing is decided twice."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import func, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from shared import edits
from shared.inbox import ActionRequest, Decision, InterruptConfig

from .. import metrics
from . import claims
from .autosend import Held
from .errors import Conflict, Invalid, NotFound
from .instructions import approved_ids, learn
from .tables import DecisionRow, ItemRow, as_utc, now


@dataclass(frozen=True)
class Reviewer:
    """Who decides: the name and role a token maps to (see `inbox_api.auth`)."""

    name: str
    role: Literal["reviewer", "viewer", "reporter"]
    queues: tuple[str, ...] = ()  # the queues they work: "mine"


def _edited_request(row: ItemRow, args: Any) -> ActionRequest:
    """Accept an Agent Inbox ActionRequest, a partial args object, or plain text.

    An edit changes the text (and the subject), never the target (`shared.edits`): the action
    and every other argument (the ticket) come from the item, but for an escalation someone
    takes, whose edit is their reply on its ticket; trying anything else is refused (422)."""
    current = ActionRequest.model_validate(row.action_request)
    action: Any = None
    if isinstance(args, dict) and isinstance(args.get("args"), dict):
        action = args.get("action")
        changes = args["args"]
    elif isinstance(args, dict):
        changes = args
    elif isinstance(args, str):
        changes = {"reply": args}
    else:
        raise Invalid("an edit needs the edited action request (or the edited reply)")
    if action is not None and not isinstance(action, str):
        raise Invalid("the edited action must be a name")
    try:
        return edits.edited(current, action, changes)
    except edits.RefusedEdit as exc:
        raise Invalid(str(exc)) from None


def decide(
    engine: Engine,
    item_id: str,
    kind: str,
    args: Any,
    version: int | None,
    reviewer: Reviewer,
    *,
    auto: Callable[[Session, ItemRow], bool] | None = None,
    take_over: bool = False,
) -> Decision:
    """Record a decision (the trail row) and return it for publishing; raises 404/409/422 kinds.
    `version` is the one the reviewer saw (None: the item's own, for clients that send none).
    With `auto`, the auto-send policy decides: only if `auto(session, item)` holds, in the same
    transaction (else `Conflict`). A person's decision on an item someone else has claimed is
    refused (`claims.Claimed`) unless it says `take_over`; it ends the claim."""
    with Session(engine, expire_on_commit=False) as session:
        row = session.get(ItemRow, item_id)
        if row is None:
            raise NotFound(f"no item {item_id}")
        if version is not None and version != row.version:
            raise Conflict(f"you saw v{version}; this item is v{row.version}")
        if row.status != "waiting":
            repeated = _recorded(session, row, kind, args, reviewer)
            if repeated is not None:
                return repeated
            latest = session.exec(
                select(func.max(ItemRow.version)).where(ItemRow.thread == row.thread)
            ).one()
            if row.status == "superseded" and latest:
                newer = session.exec(
                    select(ItemRow).where(ItemRow.thread == row.thread, ItemRow.version == latest)
                ).first()
                why = f" ({newer.cause})" if newer is not None and newer.cause else ""
                raise Conflict(f"v{row.version} was superseded by v{latest}{why}")
            if row.status == "withdrawn":
                raise Conflict(f"this draft was withdrawn: {row.withdrawn_reason or 'no reason'}")
            raise Conflict(f"this item is {row.status}, not waiting for a decision")
        given: list[int] | None = None  # an auto decision: the instructions in force
        if auto is not None:
            if not auto(session, row):
                raise Conflict("auto-send does not apply to this item")
            given = approved_ids(session, row)
            if given is None:
                raise Held(
                    "auto-send: the draft was given a standing instruction no admin approved"
                )
        config = InterruptConfig.model_validate(row.config)
        if not config.allows(kind):  # type: ignore[arg-type]
            raise Invalid(f"{kind} is not allowed on this item")
        draft = str(row.action_request.get("args", {}).get("reply") or "") or None
        final_text = feedback = None
        if kind == "edit":
            edited = _edited_request(row, args)
            final_text = str(edited.args.get("reply") or "").strip()
            if not final_text:
                raise Invalid("an edit needs a non-empty reply")
            args = edited.model_dump(mode="json")
        elif kind == "response":
            feedback = str(args or "").strip()
            if not feedback:
                raise Invalid("feedback must not be empty")
            args = feedback
        elif kind == "accept":
            if not (draft or "").strip() or row.no_draft:
                raise Invalid("there is no draft to accept: write the reply (edit)")
            final_text = draft
            args = None
        else:
            args = None
        decided_at = now()
        if auto is None:
            claims.before_decision(session, row, reviewer.name, take_over, decided_at)
        session.add(
            DecisionRow(
                item_id=row.id,
                thread=row.thread,
                version=row.version,
                type=kind,
                reviewer=reviewer.name,
                category=row.category,
                decided_at=decided_at,
                args=args,
                model_draft=draft,
                final_text=final_text,
                feedback=feedback,
                round=row.round,
                auto=auto is not None or None,
                instructions=given,
            )
        )
        if feedback:  # feedback that recurs across tickets becomes a standing instruction
            with session.no_autoflush:  # a racing decision fails at commit: 409, below
                learn(session, row, feedback, reviewer.name, decided_at)
        # only if it still waits: a newer version projected since it was read (which
        # supersedes it) or another decision wins, and this one is refused, never written over
        # it (an item left "sending" that no result would ever end)
        status = {"ignore": "ignored", "response": "redrafting"}.get(kind, "sending")
        try:
            still = session.execute(
                update(ItemRow)
                .where(col(ItemRow.id) == row.id, col(ItemRow.status) == "waiting")
                .values(status=status, decision=kind, updated_at=decided_at)
                .execution_options(synchronize_session=False)
            )
            if still.rowcount != 1:  # type: ignore[attr-defined]
                raise _Changed
            session.commit()
        except (IntegrityError, _Changed):
            session.rollback()
            repeated = _recorded(session, row, kind, args, reviewer)
            if repeated is not None:  # the same decision, posted twice at once
                return repeated
            raise Conflict(
                "this item was decided, or replaced by a newer version, a moment ago"
            ) from None
        metrics.DECISIONS.labels(row.category or "other", kind).inc()
        return Decision(
            type=kind,  # type: ignore[arg-type]
            args=args,
            item_id=row.id,
            thread=row.thread,
            version=row.version,
            reviewer=reviewer.name,
            decided_at=decided_at,
            round=row.round or "r1",
            auto=auto is not None,
        )


class _Changed(Exception):
    """The item no longer waits: decided, or superseded, since it was read."""


def _recorded(
    session: Session, row: ItemRow, kind: str, args: Any, reviewer: Reviewer
) -> Decision | None:
    """The decision already recorded on this version, if `kind`/`args` by `reviewer` repeat it."""
    found = session.exec(
        select(DecisionRow).where(
            DecisionRow.thread == row.thread, DecisionRow.version == row.version
        )
    ).first()
    if found is None or found.type != kind or found.reviewer != reviewer.name:
        return None
    if kind == "edit":
        try:
            text = str(_edited_request(row, args).args.get("reply") or "").strip()
        except Invalid:
            return None
        if text != found.final_text:
            return None
    elif kind == "response" and str(args or "").strip() != found.feedback:
        return None
    return _decision_of(found)


def _decision_of(r: DecisionRow) -> Decision:
    return Decision(
        type=r.type,  # type: ignore[arg-type]
        args=r.args,
        item_id=r.item_id,
        thread=r.thread,
        version=r.version,
        reviewer=r.reviewer,
        decided_at=as_utc(r.decided_at),  # type: ignore[arg-type]
        round=r.round or "r1",
        auto=bool(r.auto),
    )


def origin_of(engine: Engine, item_id: str) -> tuple[str | None, str | None]:
    """The trace an item belongs to and the event it descends from (its correlation id): what
    its decision, audit and notices continue."""
    with Session(engine) as session:
        found = session.exec(
            select(ItemRow.traceparent, ItemRow.trigger_event_id).where(ItemRow.id == item_id)
        ).first()
    return (found[0], found[1]) if found is not None else (None, None)


def mark_published(engine: Engine, thread: str, version: int) -> None:
    with engine.begin() as connection:
        connection.execute(
            update(DecisionRow)
            .where(
                col(DecisionRow.thread) == thread,
                col(DecisionRow.version) == version,
                col(DecisionRow.published).is_(False),
            )
            .values(published=True)
        )


def unpublished(engine: Engine, older_than: float) -> list[Decision]:
    """Decisions recorded but not yet on the bus (a crash between commit and publish)."""
    cutoff = now() - dt.timedelta(seconds=older_than)
    with Session(engine, expire_on_commit=False) as session:
        rows = session.exec(
            select(DecisionRow)
            .where(col(DecisionRow.published).is_(False), col(DecisionRow.decided_at) <= cutoff)
            .order_by(col(DecisionRow.decided_at))
        ).all()
        return [_decision_of(r) for r in rows]
