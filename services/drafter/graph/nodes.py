"""The nodes. Each returns a partial state; the model is called only in `draft`."""

from __future__ import annotations

import datetime as dt
from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from shared.errors import PermanentError
from shared.inbox import (
    DRAFT_CONFIG,
    NOTIFY_CONFIG,
    NOTIFY_SUPERVISOR,
    SEND_REPLY,
    ActionRequest,
    Cost,
    Decision,
    InboxItem,
    Trigger,
    item_id,
)

from .. import checks, model, prompt
from .state import Deps, State


async def load(state: State, runtime: Runtime[Deps]) -> dict[str, Any]:
    inline = state.get("inline_ticket")
    if inline:
        return {"ticket": inline}
    ticket = await runtime.context.source.get_ticket(state["ticket_id"])
    return {"ticket": ticket.model_dump(mode="json")}


async def guard(state: State) -> dict[str, Any]:
    """Business rules before any model call."""
    ticket = state["ticket"]
    if ticket.get("status") == "closed":
        return {"outcome": "closed", "escalation": []}
    text = f"{ticket.get('subject', '')}\n{ticket.get('body', '')}"
    return {"escalation": checks.escalation_terms(text), "outcome": ""}


async def draft(state: State, runtime: Runtime[Deps]) -> dict[str, Any]:
    deps = runtime.context
    ticket = state["ticket"]
    feedback = state.get("feedback", [])
    problems: list[str] = []
    warnings: list[str] = []
    tokens_in = tokens_out = 0
    answer = None
    for attempt in (1, 2):  # a draft that fails the checks is redrafted once
        answer = await model.ask(deps.model, prompt.messages(ticket, feedback, problems))
        tokens_in += answer.input_tokens
        tokens_out += answer.output_tokens
        if answer.draft is None:
            problems = [answer.problem or "no draft"]
        else:
            problems = checks.draft_problems(
                answer.draft.summary,
                answer.draft.reply,
                max_reply_chars=deps.max_reply_chars,
                allow_links=deps.allow_links,
            )
        if not problems:
            break
        if attempt == 2:
            warnings = problems
    assert answer is not None
    if answer.draft is None:
        raise PermanentError(f"the model gave no usable draft twice: {problems[0]}")
    usd = (tokens_in * deps.price_input + tokens_out * deps.price_output) / 1_000_000
    usage = {"input_tokens": tokens_in, "output_tokens": tokens_out, "usd": round(usd, 6)}
    version = state.get("version", 0) + 1
    d = answer.draft
    item = InboxItem(
        action_request=ActionRequest(
            action=SEND_REPLY,
            args={
                "ticket_id": ticket["id"],
                "subject": f"Re: {ticket.get('subject', '')}",
                "reply": d.reply,
            },
        ),
        config=DRAFT_CONFIG,
        description=_description(ticket, d.summary, feedback, warnings),
        id=item_id(state["thread"], version),
        thread=state["thread"],
        version=version,
        ticket_id=ticket["id"],
        category=d.category,
        summary=d.summary,
        trigger=Trigger(**state["trigger"]),
        created_at=dt.datetime.now(dt.UTC),
        cost=Cost(input_tokens=tokens_in, output_tokens=tokens_out, usd=usage["usd"]),
        warnings=warnings,
        feedback=feedback,
    )
    return {
        "draft": d.model_dump(),
        "warnings": warnings,
        "usage": usage,
        "version": version,
        "item": item.model_dump(mode="json"),
        "handled_version": state.get("event_version") or ticket.get("updated_at"),
    }


async def notify(state: State) -> dict[str, Any]:
    """Escalation: a supervisor must see it; no draft, only acknowledge (ignore) allowed."""
    ticket = state["ticket"]
    terms = state.get("escalation", [])
    version = state.get("version", 0) + 1
    item = InboxItem(
        action_request=ActionRequest(
            action=NOTIFY_SUPERVISOR,
            args={"ticket_id": ticket["id"], "reason": "escalation words", "matched": terms},
        ),
        config=NOTIFY_CONFIG,
        description=(
            f"Ticket {ticket['id']} from {(ticket.get('customer') or {}).get('name', 'a customer')}"
            f" mentions {', '.join(terms)}. No reply was drafted: a supervisor should handle it."
        ),
        id=item_id(state["thread"], version),
        thread=state["thread"],
        version=version,
        ticket_id=ticket["id"],
        category="escalation",
        summary=f"Escalation: {ticket.get('subject', '')}"[:120],
        trigger=Trigger(**state["trigger"]),
        created_at=dt.datetime.now(dt.UTC),
    )
    return {
        "version": version,
        "item": item.model_dump(mode="json"),
        "handled_version": state.get("event_version") or ticket.get("updated_at"),
    }


async def review(state: State) -> dict[str, Any]:
    """Pause for a human. Runs again from the top on resume, so nothing before interrupt()."""
    answer = interrupt(state["item"])
    decision = Decision.model_validate(answer)
    update: dict[str, Any] = {"decision": decision.model_dump(mode="json")}
    if decision.type == "response":
        update["feedback"] = [*state.get("feedback", []), str(decision.args or "").strip()]
    return update


async def finish(state: State) -> dict[str, Any]:
    decision = state.get("decision") or {}
    action = (state.get("item") or {}).get("action_request", {}).get("action")
    outcome = {"accept": "accepted", "edit": "edited", "ignore": "ignored"}.get(
        decision.get("type", ""), "ignored"
    )
    if action == NOTIFY_SUPERVISOR and outcome == "ignored":
        outcome = "acknowledged"
    return {"outcome": outcome}


def _description(
    ticket: dict[str, Any], summary: str, feedback: list[str], warnings: list[str]
) -> str:
    customer = (ticket.get("customer") or {}).get("name", "a customer")
    lines = [f"Ticket {ticket['id']} from {customer}: {summary}"]
    if feedback:
        lines.append(f"Redrafted with {len(feedback)} piece(s) of reviewer feedback.")
    if warnings:
        lines.append("Check before sending: " + "; ".join(warnings))
    return "\n".join(lines)
