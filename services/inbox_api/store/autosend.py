"""Evidence-based auto-send: a category whose drafts reviewers send as written may be sent
without waiting for them, while people keep checking a sample, and loses it when they find edits.

- **Enabling** is for an admin (`DESK_ADMINS`), per category, and only with the evidence: the
  category's last `evidence` decisions on reply drafts (200 by default) were at least `unedited`
  (98 %) accepts of the draft as written (an accept or edit counts once its reply went out, or
  is on its way: one withdrawn, failed or superseded reached nobody and is no evidence), and a
  `desk eval --json` report comes with the request whose case results pass (recomputed here, not
  believed: `shared.evidence`) and cover the category; its case file's sha256 is recorded.
  Otherwise the refusal says what is missing.
- **Sending**: an item of an enabled category that the checks raised no warning about is
  decided by `AUTO_SEND` (an accept, marked `auto`) in the transaction that records it; the
  sender then sends it like any approval, through the outbox and its fresh-state check, and marks
  the result event `auto`. A share `audit` of them (10 %, chosen by the item id's HMAC under the
  deployment's secret audit key, so nobody outside can predict which) waits for a person's
  audit after sending.
- **Demotion**: an audit that found the reply needed editing counts against the category; when
  more than `demote` of its latest audits since it was turned on (up to `AUDIT_WINDOW`) found
  edits, the category is demoted to human review at once.

Every enabling, disabling and demotion is a row in `inbox_autosend` with who and the evidence.

Most teams turn it on for no category: the projection asks `on_for(engine)`, the categories on
now, read at most every `ON_FOR_TTL` seconds (and again at once after a change made by this
process), before it tries the policy's transaction. That read only keeps items out of it; the
transaction decides, so an answer a few seconds old never sends what it should not.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, or_
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from shared import evidence as evidence_of_eval
from shared.inbox import AUTO_SEND, CATEGORIES, SEND_REPLY

from .analytics import WENT_OUT
from .errors import Conflict, Invalid, NotFound
from .tables import AutoSendRow, DecisionRow, InstructionRow, ItemRow, as_utc, now

AUDIT_WINDOW = 20  # the latest audits of a category a demotion looks at
ON_FOR_TTL = 5.0  # seconds `on_for` answers from what it read (another replica's change)
_on_for: weakref.WeakKeyDictionary[Engine, tuple[float, frozenset[str]]] = (
    weakref.WeakKeyDictionary()
)
_on_for_lock = threading.Lock()


@dataclass(frozen=True)
class Policy:
    evidence: int = 200
    unedited: float = 0.98
    audit: float = 0.10
    demote: float = 0.10
    per_ticket_day: int = 2  # auto-sent replies to one ticket in any 24 hours, at most
    audit_key: bytes = field(default=b"", repr=False)  # DESK_AUDIT_KEY: keys `sampled`


def _latest(session: Session, category: str) -> AutoSendRow | None:
    return session.exec(
        select(AutoSendRow)
        .where(AutoSendRow.category == category)
        .order_by(col(AutoSendRow.id).desc())
        .limit(1)
    ).first()


def on_for_known(engine: Engine) -> frozenset[str] | None:
    """`on_for` as read less than `ON_FOR_TTL` seconds ago, without touching the database;
    None when it is to be read again."""
    with _on_for_lock:
        cached = _on_for.get(engine)
    if cached is not None and time.monotonic() - cached[0] < ON_FOR_TTL:
        return cached[1]
    return None


def on_for(engine: Engine) -> frozenset[str]:
    """The categories auto-send is on for now, as read at most `ON_FOR_TTL` seconds ago."""
    cached = on_for_known(engine)
    if cached is not None:
        return cached
    read_at = time.monotonic()
    with Session(engine) as session:
        latest = (
            select(func.max(AutoSendRow.id)).group_by(col(AutoSendRow.category)).scalar_subquery()
        )
        rows = session.exec(
            select(AutoSendRow.category).where(
                col(AutoSendRow.id).in_(latest), AutoSendRow.action == "enabled"
            )
        ).all()
    found = frozenset(rows)
    with _on_for_lock:
        _on_for[engine] = (read_at, found)
    return found


def _changed(engine: Engine) -> None:
    with _on_for_lock:
        _on_for.pop(engine, None)


def enabled(session: Session, category: str | None) -> bool:
    found = _latest(session, category) if category else None
    return found is not None and found.action == "enabled"


def evidence(session: Session, category: str, policy: Policy) -> dict[str, Any]:
    """The category's last decisions on reply drafts by people, and how many were accepts (of
    the accepts and edits, only those whose reply went out: `analytics.WENT_OUT`)."""
    kinds = session.exec(
        select(DecisionRow.type)
        .join(ItemRow, col(DecisionRow.item_id) == col(ItemRow.id))
        .where(
            DecisionRow.category == category,
            ItemRow.action == SEND_REPLY,
            col(DecisionRow.auto).is_not(True),
            or_(
                col(DecisionRow.type).not_in(("accept", "edit")),
                col(ItemRow.status).in_(WENT_OUT),
            ),
        )
        .order_by(col(DecisionRow.id).desc())
        .limit(policy.evidence)
    ).all()
    accepts = sum(k == "accept" for k in kinds)
    share = round(accepts / len(kinds), 4) if kinds else None
    return {
        "decisions": len(kinds),
        "needed": policy.evidence,
        "unedited_accepts": accepts,
        "unedited_share": share,
        "threshold": policy.unedited,
        "enough": len(kinds) >= policy.evidence and (share or 0) >= policy.unedited,
    }


def _eval_passed(report: Any, category: str) -> tuple[str | None, dict[str, Any]]:
    """Why a `desk eval --json` report does not let `category` be enabled (None: it does), and
    what it shows, recomputed from its case results (`shared.evidence`): not what it claims."""
    try:
        return None, evidence_of_eval.check(report, category)
    except evidence_of_eval.Unproven as exc:
        return str(exc), {}


def change(
    engine: Engine, category: Any, on: bool, who: str, policy: Policy, report: Any = None
) -> dict[str, Any]:
    """Enable (with the evidence) or disable auto-send for `category`."""
    if category not in CATEGORIES:
        raise NotFound(f"no category {category!r}")
    with Session(engine, expire_on_commit=False) as session:
        found = evidence(session, category, policy)
        if on:
            problems = []
            if not found["enough"]:
                problems.append(
                    f"the last {found['decisions']} decisions (of {policy.evidence} needed) were "
                    f"{_pct(found['unedited_share'])} unedited accepts (needs "
                    f"{policy.unedited:.0%})"
                )
            why, shown = _eval_passed(report, category)
            if why:
                problems.append(why)
            if problems:
                raise Invalid("auto-send needs its evidence: " + "; ".join(problems))
            found["eval"] = shown  # the case file's sha256, and the figures as recomputed
            found["instructions"] = _instructions(session, category)
        elif not enabled(session, category):
            raise Conflict(f"auto-send is not on for {category}")
        row = AutoSendRow(
            category=category,
            action="enabled" if on else "disabled",
            at=now(),
            by=who,
            evidence=found,
        )
        session.add(row)
        session.commit()
        _changed(engine)
        return trail_json(row)


def _instructions(session: Session, category: str) -> dict[str, list[int]]:
    """The category's standing instructions as auto-send starts: those an admin approved go on
    reaching its drafts; the others (and edits proposed) wait for an admin from now on."""
    rows = session.exec(
        select(InstructionRow)
        .where(InstructionRow.category == category, InstructionRow.status != "removed")
        .order_by(col(InstructionRow.id))
    ).all()
    approved = [r.id or 0 for r in rows if r.status == "active" and r.approved_by]
    return {"approved": approved, "waiting": [r.id or 0 for r in rows if r.id not in approved]}


def _pct(share: float | None) -> str:
    return "none" if share is None else f"{share:.1%}"


class Held(Conflict):
    """Auto-send would apply but for this reason: the item waits for a person, who is told."""


def applies(policy: Policy, doubts: Sequence[str] = ()) -> Any:
    """The check `decide(..., auto=)` runs in its transaction: the item's category is enabled,
    its draft raised no warning, nothing the inbox found out about it (`doubts`: its provenance,
    its text checked again) holds it back, and its ticket has not had `per_ticket_day` auto-sent
    replies in the last 24 hours (`Held` says why not); it marks the item auto-sent (and
    sampled for audit)."""

    def check(session: Session, row: ItemRow) -> bool:
        if row.action != SEND_REPLY or row.warnings or not enabled(session, row.category):
            return False
        if row.no_draft or not str((row.action_request.get("args") or {}).get("reply") or ""):
            return False  # no draft (the model failed): a person writes the reply
        if doubts:
            raise Held("; ".join(doubts))
        since = now() - dt.timedelta(days=1)
        sent = session.exec(
            select(func.count())
            .select_from(DecisionRow)
            .where(
                DecisionRow.thread == row.thread,
                col(DecisionRow.auto).is_(True),
                col(DecisionRow.decided_at) >= since,
            )
        ).one()
        if sent >= policy.per_ticket_day:
            raise Held(
                f"auto-send: this ticket had {sent} auto-sent replies in the last 24 hours "
                f"(at most {policy.per_ticket_day})"
            )
        row.auto = True
        if sampled(row.id, policy.audit, policy.audit_key):
            row.audit = "waiting"
        return True

    return check


def hold(engine: Engine, item_id: str, reasons: Sequence[str]) -> bool:
    """Auto-send held a waiting item back: its reasons join the warnings the reviewer sees
    (each once, however often the item is delivered); False if it waits no more."""
    with Session(engine) as session:
        row = session.get(ItemRow, item_id)
        if row is None or row.status != "waiting":
            return False
        new = [r for r in dict.fromkeys(reasons) if r not in row.warnings]
        if new:
            row.warnings = [*row.warnings, *new]
            session.add(row)
            session.commit()
        return True


def sampled(item_id: str, share: float, key: bytes) -> bool:
    """Whether an auto-sent item waits for an audit: by the item id's HMAC under the
    deployment's audit key (`DESK_AUDIT_KEY`), so the same item is picked every time (a
    redelivery picks the same) but nobody without the key can tell which ones will be."""
    mac = hmac.new(key, item_id.encode(), hashlib.sha256).digest()
    return int.from_bytes(mac[:4], "big") < share * 2**32


def audit(
    engine: Engine, item_id: str, verdict: Any, who: str, note: Any, policy: Policy
) -> dict[str, Any]:
    """A person's audit of an auto-sent reply: `fine`, or `edited` (it needed changes; `note`
    says what). Too many edits among the category's latest audits demote it."""
    if verdict not in ("fine", "edited"):
        raise Invalid("verdict must be fine or edited")
    with Session(engine, expire_on_commit=False) as session:
        row = session.get(ItemRow, item_id)
        if row is None or not row.auto:
            raise NotFound(f"no auto-sent item {item_id}")
        if row.audit not in ("waiting", None):
            raise Conflict(f"{item_id} was audited already ({row.audit})")
        row.audit, row.audit_by, row.updated_at = verdict, who, now()
        row.audit_note = str(note).strip()[:2000] if isinstance(note, str) and note else None
        row.audit_published, row.audited_at = False, row.updated_at  # told to the drafter
        session.add(row)
        session.flush()
        state = _latest(session, str(row.category))
        latest: list[str | None] = []
        if state is not None and state.action == "enabled":  # audits since it was turned on
            latest = list(
                session.exec(
                    select(ItemRow.audit)
                    .where(
                        ItemRow.category == row.category,
                        col(ItemRow.audit).in_(("fine", "edited")),
                        col(ItemRow.updated_at) >= state.at,
                    )
                    .order_by(col(ItemRow.updated_at).desc())
                    .limit(AUDIT_WINDOW)
                ).all()
            )
        edited = sum(a == "edited" for a in latest)
        demoted = None
        if latest and edited / len(latest) > policy.demote:
            demoted = AutoSendRow(
                category=str(row.category),
                action="demoted",
                at=now(),
                by=AUTO_SEND,
                evidence={
                    "audits": len(latest),
                    "edited": edited,
                    "threshold": policy.demote,
                    "item_id": item_id,
                    "note": row.audit_note,
                },
            )
            session.add(demoted)
        session.commit()
        if demoted is not None:
            _changed(engine)
        return {
            "item_id": item_id,
            "audit": verdict,
            "demoted": trail_json(demoted) if demoted is not None else None,
        }


def trail_json(row: AutoSendRow) -> dict[str, Any]:
    return {
        "category": row.category,
        "action": row.action,
        "at": as_utc(row.at).isoformat(),  # type: ignore[union-attr]
        "by": row.by,
        "evidence": row.evidence,
    }


def overview(engine: Engine, policy: Policy) -> dict[str, Any]:
    """Per category: on or off, the evidence now, the audits waiting; and the whole trail."""
    with Session(engine, expire_on_commit=False) as session:
        categories = {}
        for category in CATEGORIES:
            waiting = session.exec(
                select(ItemRow.id)
                .where(ItemRow.category == category, ItemRow.audit == "waiting")
                .order_by(col(ItemRow.created_at))
            ).all()
            categories[category] = {
                "enabled": enabled(session, category),
                "evidence": evidence(session, category, policy),
                "audits_waiting": list(waiting),
            }
        trail = session.exec(select(AutoSendRow).order_by(col(AutoSendRow.id))).all()
        return {
            "policy": {
                "evidence": policy.evidence,
                "unedited": policy.unedited,
                "audit": policy.audit,
                "demote": policy.demote,
            },
            "categories": categories,
            "trail": [trail_json(r) for r in trail],
        }
