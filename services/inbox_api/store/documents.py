"""What the API gives out for a row: an item, an item with its conversation, a decision."""

from __future__ import annotations

from typing import Any

from shared import trace

from . import targets
from .tables import DecisionRow, ItemRow, as_utc, now


def item_json(row: ItemRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "thread": row.thread,
        "version": row.version,
        "status": row.status,
        "category": row.category,
        "ticket_id": row.ticket_id,
        "summary": row.summary,
        "description": row.description,
        "action_request": row.action_request,
        "config": row.config,
        "trigger": {
            "source": row.trigger_source,
            "type": row.trigger_type,
            "event_id": row.trigger_event_id,
        },
        "cost": row.cost,
        "warnings": row.warnings,
        "feedback": row.feedback,
        "decision": row.decision,
        "result": row.result,
        "created_at": as_utc(row.created_at).isoformat(),  # type: ignore[union-attr]
        "updated_at": as_utc(row.updated_at).isoformat(),  # type: ignore[union-attr]
        "round": row.round,
        "round_kind": row.round_kind,
        "cause": row.cause,
        "priority": row.priority,
        "ticket_status": row.ticket_status,
        "customer": row.customer,
        "round_messages": row.round_messages or [],
        "overdue_since": row.overdue_since.isoformat() if row.overdue_since else None,
        "withdrawn_reason": row.withdrawn_reason,
        "trace_id": _trace_id(row.traceparent),
        "citations": row.citations or [],
        "no_draft": row.no_draft,
        "instructions": row.instructions or [],
        "examples": row.examples or [],
        "auto": bool(row.auto),
        "audit": row.audit,
        "audit_by": row.audit_by,
        "audit_note": row.audit_note,
        "queue": row.queue,
        "service_level": _service_level(row),
    }


def _service_level(row: ItemRow) -> dict[str, Any] | None:
    """Where the item stands against its target: ok, near or past (None: no target)."""
    if row.due_at is None:
        return None
    due, near = as_utc(row.due_at), as_utc(row.near_at)
    return {
        "standing": targets.standing(row.status, near, due, now()),
        "near_at": near.isoformat() if near else None,
        "due_at": due.isoformat() if due else None,
        "waiting_since": _iso(row.waiting_since),
    }


def _iso(value: Any) -> str | None:
    stamp = as_utc(value)
    return stamp.isoformat() if stamp else None


def _trace_id(traceparent: str | None) -> str | None:
    found = trace.Trace.parse(traceparent)
    return found.trace_id if found else None


def detail_json(row: ItemRow) -> dict[str, Any]:
    """One item with its whole conversation (the list leaves the conversation out)."""
    detail = item_json(row)
    detail["conversation"] = row.conversation or []
    return detail


def decision_json(row: DecisionRow) -> dict[str, Any]:
    return {
        "item_id": row.item_id,
        "thread": row.thread,
        "version": row.version,
        "type": row.type,
        "reviewer": row.reviewer,
        "category": row.category,
        "decided_at": as_utc(row.decided_at).isoformat(),  # type: ignore[union-attr]
        "args": row.args,
        "model_draft": row.model_draft,
        "final_text": row.final_text,
        "feedback": row.feedback,
        "auto": bool(row.auto),
        "instructions": row.instructions,  # auto: the approved instructions the draft was given
    }
