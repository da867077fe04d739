"""A thread's examples: those a draft is shown (`shown`), and the reply a person approved, kept
as one for the next similar round of the helpdesk (`keep`; `memory` says how)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore

from shared.inbox import CATEGORIES

from .. import memory, prompt
from ..examples import Example, helpdesk_of, key
from ..knowledge import Passage
from .state import Deps, State


async def shown(
    state: State, runtime: Runtime[Deps], passages: list[Passage], round_: dict[str, Any]
) -> list[Example]:
    """The sent replies of the past rounds from the same helpdesk most like this one, of the
    category it is likely in: the one its last draft chose (a redraft), or that of the
    knowledge it was given."""
    if runtime.store is None or runtime.context.examples <= 0:
        return []
    category = (state.get("draft") or {}).get("category") or next(
        (p.category for p in passages if p.category in CATEGORIES), None
    )
    return await memory.similar(
        runtime.store,
        prompt.query(state["ticket"], round_),
        category,
        runtime.context.examples,
        source=helpdesk(state),
        besides=key(state["thread"], state.get("round") or ""),
    )


def helpdesk(state: State) -> str:
    """The helpdesk the ticket belongs to (not the source of the event that woke the round: a
    webhook, a backfill and a stale scan of one ticket are one helpdesk's)."""
    return helpdesk_of(str(state["ticket"].get("id") or state["thread"]))


def customer_names(ticket: dict[str, Any]) -> list[str]:
    """What names the customer in the ticket: their name, address and id as the helpdesk
    has them, and the names and addresses their messages are signed with."""
    customer = ticket.get("customer") or {}
    names = [str(customer.get(field) or "") for field in ("name", "email", "id")]
    for m in ticket.get("messages") or []:
        if m.get("author") == "customer":
            names += [str(m.get("author_name") or ""), str(m.get("author_email") or "")]
    return [n for n in dict.fromkeys(names) if n.strip()]


def sent_text(state: State, decision: dict[str, Any]) -> str:
    """The reply as approved: the reviewer's edit, or the draft."""
    args = (state.get("item") or {}).get("action_request", {}).get("args", {})
    text = str(args.get("reply") or "")
    edited = decision.get("args")
    if decision.get("type") == "edit" and isinstance(edited, dict):
        text = str((edited.get("args") or {}).get("reply") or text)
    return text


async def keep(store: BaseStore, state: State, decision: dict[str, Any], *, edited: bool) -> None:
    """The reply a person approved, as the round's example: remembered; held for a person's
    audit when auto-send sent it."""
    item = state.get("item") or {}
    example = Example(
        ticket=str(state["ticket"].get("id")),
        round=state.get("round") or "r1",
        category=str(item.get("category") or "other"),
        source=helpdesk(state),
        reply=sent_text(state, decision),
        edited=edited,
        at=str(decision.get("decided_at") or dt.datetime.now(dt.UTC).isoformat()),
    )
    names = customer_names(state["ticket"])
    if decision.get("auto"):
        await memory.hold(
            store,
            state["thread"],
            example,
            item=str(item.get("id") or ""),
            version=int(item.get("version") or 0),
            names=names,
        )
    else:
        await memory.remember(store, state["thread"], example, names=names)
