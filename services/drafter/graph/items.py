"""The parts of an inbox item a node builds from the thread's state: the action it proposes,
what the reviewer reads first, the passages it cites, and the conversation it belongs to."""

from __future__ import annotations

from typing import Any

from shared.helpdesk.base import Customer, Ticket
from shared.inbox import SEND_REPLY, ActionRequest, Citation

from ..knowledge import Passage
from .state import State


def reply(ticket: dict[str, Any], text: str) -> ActionRequest:
    """Sending `text` as the public reply on `ticket`."""
    args = {"ticket_id": ticket["id"], "subject": f"Re: {ticket.get('subject', '')}", "reply": text}
    return ActionRequest(action=SEND_REPLY, args=args)


def citations(passages: list[Passage], sources: list[str]) -> list[Citation]:
    """The given passages of each article the draft cites, in the order it cites them."""
    return [
        Citation(article=p.article, title=p.title, section=p.section, passage=p.text, url=p.url)
        for article in dict.fromkeys(sources)
        for p in passages
        if p.article == article
    ]


def conversation_fields(state: State) -> dict[str, Any]:
    ticket = Ticket.model_validate(state["ticket"])
    cause = state.get("cause") or None
    if cause is None and state.get("round_kind") == "followup":
        cause = "follow-up: the ticket waits on the customer"
    return {
        "round": state.get("round") or "r1",
        "round_kind": state.get("round_kind") or "answer",
        "round_messages": list(state.get("round_messages", [])),
        "seen_through": state.get("seen_through"),
        "cause": cause,
        "conversation": list(ticket.messages),
        "customer": Customer.model_validate(ticket.customer.model_dump()),
        "ticket_status": ticket.status,
        "priority": ticket.priority,
        "in_helpdesk": not state.get("inline_ticket"),
    }


def description(
    ticket: dict[str, Any], summary: str, feedback: list[str], warnings: list[str]
) -> str:
    customer = (ticket.get("customer") or {}).get("name", "a customer")
    lines = [f"Ticket {ticket['id']} from {customer}: {summary}"]
    if feedback:
        lines.append(f"Redrafted with {len(feedback)} piece(s) of reviewer feedback.")
    if warnings:
        lines.append("Check before sending: " + "; ".join(warnings))
    return "\n".join(lines)
