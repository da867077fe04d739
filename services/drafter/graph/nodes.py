"""The nodes. Each returns a partial state; the model is called only in `draft`."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from shared import conversation
from shared.helpdesk.base import Ticket
from shared.inbox import (
    DRAFT_CONFIG,
    NOTIFY_CONFIG,
    NOTIFY_SUPERVISOR,
    SEND_REPLY,
    WRITE_CONFIG,
    ActionRequest,
    Cost,
    Decision,
    InboxItem,
    Trigger,
    item_id,
)

from .. import checks, metrics, prompt, writer
from ..health import ModelFailed
from ..knowledge import Passage
from . import items, lessons
from .state import Deps, State


async def load(state: State, runtime: Runtime[Deps]) -> dict[str, Any]:
    """The ticket as it is now, the round this run answers, and the business rules' verdict on
    it (one step: both may be redone after a crash, neither calls the model)."""
    inline = state.get("inline_ticket")
    if inline:
        ticket = _with_history(Ticket.model_validate(inline), state.get("ticket"))
    else:
        ticket = await runtime.context.source.get_ticket(state["ticket_id"])
    plan = state.get("plan") or {"kind": "answer"}
    update: dict[str, Any] = {"ticket": ticket.model_dump(mode="json")}
    if plan.get("kind") == "followup":
        update.update(round=plan["id"], round_kind="followup", round_messages=[])
    else:
        # a reminder redrafts a round whose draft was ignored: what it covered counts again
        covered = None if plan.get("kind") == "reminder" else state.get("covered")
        found = conversation.open_round(ticket, covered=covered)
        if found is None:
            update.update(round="", round_messages=[])
            return {**update, **_rules(update)}
        update.update(round=found.id, round_kind="answer", round_messages=found.message_ids)
    update["seen_through"] = conversation.newest_message(ticket)
    update["covered_before"] = {
        **(state.get("covered_before") or {}),
        update["round"]: state.get("covered"),
    }
    return {**update, **_rules(update)}


def _with_history(mail: Ticket, earlier: dict[str, Any] | None) -> Ticket:
    """A mail conversation: the messages this thread already has, then the new mail's."""
    if not earlier:
        return mail
    before = Ticket.model_validate(earlier)
    known = {m.id for m in before.messages}
    messages = [*before.messages, *(m for m in mail.messages if m.id not in known)]
    return before.model_copy(update={"messages": messages, "updated_at": mail.updated_at})


async def guard(state: State) -> dict[str, Any]:
    """The business rules as a step of their own: only threads saved before `load` applied
    them itself resume here."""
    return _rules(state)


def _rules(state: Any) -> dict[str, Any]:
    """Business rules before any model call, on the loaded ticket and round."""
    ticket = state["ticket"]
    if ticket.get("status") == "closed":
        return {"outcome": "closed", "escalation": []}
    if not state.get("round"):
        return {"outcome": "quiet", "escalation": []}  # nothing waits for a reply
    said = [
        m.get("body", "")
        for m in ticket.get("messages", [])
        if m.get("id") in set(state.get("round_messages", []))
    ]
    text = "\n".join([str(ticket.get("subject", "")), *said])
    return {"escalation": checks.escalation_terms(text), "outcome": ""}


async def draft(state: State, runtime: Runtime[Deps]) -> dict[str, Any]:
    deps = runtime.context
    ticket = state["ticket"]
    feedback = state.get("feedback", [])
    passages = await _passages(deps, ticket, _round(state))
    examples = await lessons.shown(state, runtime, passages, _round(state))
    instructions = (await deps.standing()).by_category() if deps.standing else {}
    asked = writer.Asked(feedback, passages, examples, instructions)
    try:
        if deps.health is None:
            written = await writer.write(deps, ticket, _round(state), asked)
        else:
            with deps.health.ticket(state["thread"]):  # its failures are counted for it
                written = await writer.write(deps, ticket, _round(state), asked)
    except ModelFailed as failed:
        return _no_draft(state, str(failed), feedback)
    if written.draft is None:
        problem = f"the model gave no usable draft twice: {written.problems[0]}"
        return _no_draft(state, problem, feedback, written)
    warnings = [*state.get("notes", []), *written.problems]  # intake's notes first
    tokens_in, tokens_out = written.input_tokens, written.output_tokens
    usage = {"input_tokens": tokens_in, "output_tokens": tokens_out, "usd": written.usd}
    version = state.get("version", 0) + 1
    d = written.draft
    item = InboxItem(
        action_request=items.reply(ticket, d.reply),
        config=DRAFT_CONFIG,
        description=items.description(ticket, d.summary, feedback, warnings),
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
        citations=items.citations(passages, d.sources),
        instructions=instructions.get(d.category, []),
        examples=[e.ref for e in examples],
        **items.conversation_fields(state),
    )
    return {
        "draft": d.model_dump(),
        "warnings": warnings,
        "usage": usage,
        "version": version,
        "item": item.model_dump(mode="json"),
        "handled_version": state.get("event_version") or ticket.get("updated_at"),
        "cause": None,
    }


def _no_draft(
    state: State, problem: str, feedback: list[str], written: writer.Written | None = None
) -> dict[str, Any]:
    """The model failed on this ticket: an item without a draft, for a person to write the
    reply (edit) or to ask the model again (respond). Never a dead letter: the ticket stays in
    front of the team."""
    ticket = state["ticket"]
    version = state.get("version", 0) + 1
    why = f"no draft: the model failed — write the reply yourself ({problem})"
    warnings = [*state.get("notes", []), why]
    cost = Cost()
    if written is not None:
        cost = Cost(
            input_tokens=written.input_tokens, output_tokens=written.output_tokens, usd=written.usd
        )
    customer = (ticket.get("customer") or {}).get("name", "a customer")
    item = InboxItem(
        action_request=items.reply(ticket, ""),  # written by a person
        config=WRITE_CONFIG,
        description=f"Ticket {ticket['id']} from {customer}: {why}.",
        id=item_id(state["thread"], version),
        thread=state["thread"],
        version=version,
        ticket_id=ticket["id"],
        category=(state.get("draft") or {}).get("category") or "other",
        summary=f"No draft: {ticket.get('subject', '')}"[:120],
        trigger=Trigger(**state["trigger"]),
        created_at=dt.datetime.now(dt.UTC),
        cost=cost,
        warnings=warnings,
        feedback=feedback,
        no_draft=problem,
        **items.conversation_fields(state),
    )
    metrics.NO_DRAFT.inc()
    return {
        "warnings": warnings,
        "usage": cost.model_dump(),
        "version": version,
        "item": item.model_dump(mode="json"),
        "handled_version": state.get("event_version") or ticket.get("updated_at"),
        "cause": None,
    }


async def _passages(deps: Deps, ticket: dict[str, Any], round_: dict[str, Any]) -> list[Passage]:
    """The knowledge passages this round's draft is given (none without a knowledge base).
    Searched in a thread when the directory is due a look (a change is read and indexed
    first) or the retriever is slow; otherwise on the loop, cheaper than the hop."""
    if deps.knowledge is None:
        return []
    query = prompt.query(ticket, round_)
    found = deps.knowledge.search_now(query, deps.passages)
    if found is not None:
        return found
    return await asyncio.to_thread(deps.knowledge.search, query, deps.passages)


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
        **items.conversation_fields(state),
    )
    return {
        "version": version,
        "item": item.model_dump(mode="json"),
        "handled_version": state.get("event_version") or ticket.get("updated_at"),
        "cause": None,
    }


async def review(state: State) -> dict[str, Any]:
    """Pause for a human. Runs again from the top on resume, so nothing before interrupt().

    The answer is a reviewer's `Decision`, or one of the drafter's own: `refresh` (the
    customer wrote again: draft the round anew) or `withdraw` (closed, or answered elsewhere).
    """
    answer = interrupt(state["item"])
    if isinstance(answer, dict) and answer.get("type") == "refresh":
        return {"decision": {"type": "refresh"}, "cause": str(answer.get("cause") or "")}
    if isinstance(answer, dict) and answer.get("type") == "withdraw":
        return {"decision": {"type": "withdraw"}, "withdrawn": str(answer.get("reason") or "")}
    decision = Decision.model_validate(answer)
    update: dict[str, Any] = {"decision": decision.model_dump(mode="json")}
    if decision.type == "response":
        update["feedback"] = [*state.get("feedback", []), str(decision.args or "").strip()]
        update["cause"] = "reviewer feedback"
    return update


async def finish(state: State, runtime: Runtime[Deps]) -> dict[str, Any]:
    decision = state.get("decision") or {}
    action = (state.get("item") or {}).get("action_request", {}).get("action")
    outcome = {
        "accept": "accepted",
        "edit": "edited",
        "ignore": "ignored",
        "withdraw": "withdrawn",
    }.get(decision.get("type", ""), "ignored")
    if action == NOTIFY_SUPERVISOR and outcome == "ignored":
        outcome = "acknowledged"
    # the next round starts after everything this one saw
    update: dict[str, Any] = {"outcome": outcome, "covered": state.get("seen_through")}
    if action == SEND_REPLY and outcome in ("accepted", "edited") and runtime.store is not None:
        # what a person approved is an example for the next similar round of the helpdesk
        # (idempotent: one per round), the customer's details as placeholders and never their
        # own words; forgotten if the sender withdraws it (Drafter.on_result). An auto-sent
        # reply was read by no person: held until a person's audit finds it fine (audits.py)
        await lessons.keep(runtime.store, state, decision, edited=outcome == "edited")
    if state.get("inline_ticket") and outcome in ("accepted", "edited"):
        # a mail conversation lives only here: our approved reply becomes part of it
        update["ticket"] = _replied(state, decision)
    return update


def _replied(state: State, decision: dict[str, Any]) -> dict[str, Any]:
    ticket = dict(state["ticket"])
    text = lessons.sent_text(state, decision)
    reply = {
        "id": f"desk-{state.get('round') or 'r1'}",
        "author": "agent",
        "author_name": "The Support Team",
        "body": text,
        "created_at": decision.get("decided_at") or dt.datetime.now(dt.UTC).isoformat(),
    }
    ticket["messages"] = [*ticket.get("messages", []), reply]
    return ticket


def _round(state: State) -> dict[str, Any]:
    return {
        "kind": state.get("round_kind") or "answer",
        "messages": list(state.get("round_messages", [])),
    }
