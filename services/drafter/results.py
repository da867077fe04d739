"""The sender's word on an approved reply, and what it leaves owed.

A draft whose reply went out (`reply.sent`) while its decision has not reached the drafter yet
is left as it is until it has: the ticket's news is then a new round, not a redraft that would
answer the customer's earlier messages again.
An approved reply the sender withdrew because the customer wrote again before it went out
(`reply.withdrawn`) did not answer its round: the round's messages count as unanswered again,
so the next draft answers them too. The customer's new message waits for the sender's word on
that reply (sent or withdrawn, up to `SETTLE_WAIT` after the decision) before it starts a new
round: one draft then answers everything owed, instead of a new round's draft that a late
withdrawal redrafts while a reviewer may be approving it.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from langgraph.types import Command

from shared import clock, conversation, ids
from shared.consumer import Delivery
from shared.envelope import Envelope
from shared.errors import TransientError, Unavailable
from shared.inbox import SEND_REPLY, InboxItem
from shared.ledger import Ledger
from shared.results import REPLY_SENT, REPLY_WITHDRAWN

from . import memory, threads
from .runs import Runs

REDRAFT_AFTER_WITHDRAWAL = "the approved reply was withdrawn: the customer wrote again"
REDRAFT_AFTER_SENT = "the reply to the earlier messages went out: this answers what came after"
SENT_TTL = 7 * 24 * 3600.0  # a sent reply's decision reaches the drafter well within that
# how long after its decision an approved reply's fate (sent or withdrawn) is waited for before
# a new round starts without it (a sender that never says: the round's draft goes ahead)
SETTLE_WAIT = 120.0


class Results:
    def __init__(self, runs: Runs, ledger: Ledger) -> None:
        self.runs = runs
        self.ledger = ledger

    async def on_result(self, delivery: Delivery[Envelope]) -> None:
        """`reply.sent`: remembered, for a draft whose decision is still on its way (see
        `Rounds._waiting`). `reply.withdrawn`: an approved reply did not go out. It is no
        example of a sent reply; and if the customer wrote again before it went out, its round
        is owed an answer."""
        data = delivery.body.data
        if not isinstance(data, dict):
            return
        thread, round_id = str(data.get("thread") or ""), str(data.get("round") or "")
        if not thread or not round_id:
            return
        store = self.runs.graph.store
        if delivery.body.type == REPLY_SENT:
            await self.ledger.claim(ids.sent(thread, round_id), ttl=SENT_TTL)
            if store is not None:  # an auto-sent reply held for its audit went out
                await memory.sent(store, thread, round_id)
            await self._answered_meanwhile(thread, round_id, data.get("seen_through"))
            return
        if delivery.body.type != REPLY_WITHDRAWN:
            return
        if store is not None:  # it never went out: no example of what was sent
            await memory.forget(store, thread, round_id)
        if data.get("reason") == conversation.REASONS["customer_wrote"]:
            await self._owed_again(thread, round_id, delivery.body.id)
        # done with (a new round waits for this, `settled`); closed, or a person answered:
        # nothing of ours is owed
        await self.ledger.claim(ids.unsent(thread, round_id), ttl=SENT_TTL)

    async def settled(self, thread: str, values: dict[str, Any]) -> None:
        """Wait (in place, no attempt spent) while the reply a person approved for the thread's
        last round has neither gone out nor been withdrawn: if the sender withdraws it because
        the customer wrote again, that round is drafted again with the new message in it."""
        round_id = values.get("round")
        decided = (values.get("decision") or {}).get("decided_at")
        action = ((values.get("item") or {}).get("action_request") or {}).get("action")
        if values.get("outcome") not in ("accepted", "edited") or action != SEND_REPLY:
            return
        if not round_id or not decided:
            return
        try:
            at = clock.parse(str(decided))
        except ValueError:
            return
        age = (dt.datetime.now(dt.UTC) - at).total_seconds()
        if age > SETTLE_WAIT:
            return  # a sender that never said: go ahead (a late withdrawal still redrafts)
        for key in (ids.sent(thread, round_id), ids.unsent(thread, round_id)):
            if await self.ledger.seen(key):
                return
        raise Unavailable(
            f"the reply approved for {thread} round {round_id} is still with the sender;"
            " the customer's new message waits for it",
            retry_after=1.0,
        )

    async def _owed_again(self, thread: str, round_id: str, event_id: str) -> None:
        """An approved reply withdrawn because the customer wrote again: its round's messages
        are owed an answer, in the waiting draft or in the round drafted again."""
        config = self.runs.config(thread)
        async with self.runs.lease(thread):
            await self.runs.finish_cut_off(config)
            state = await self.runs.state(config)
            values = state.values
            before = (values.get("covered_before") or {}).get(round_id, "?")
            if before == "?":
                return  # not a round this thread drafted (or drafted before rounds were kept)
            # no work message: a redraft after a withdrawal waits for a person (auto-send
            # needs the router's message about the ticket)
            trigger = {"source": "sender", "type": REPLY_WITHDRAWN, "event_id": event_id}
            queue = (values.get("trigger") or {}).get("queue")
            if queue:  # the redraft waits where the round did
                trigger["queue"] = queue
            if state.interrupts:
                item = InboxItem.model_validate(state.interrupts[0].value)
                if round_id in item.round_messages or item.round == round_id:
                    return  # the waiting draft answers those messages already
                resume = {"type": "refresh", "cause": REDRAFT_AFTER_WITHDRAWAL}
                update = {"covered": before, "trigger": trigger}
                await self.runs.after(
                    await self.runs.run(Command(resume=resume, update=update), config)
                )
            elif state.next:
                raise TransientError(f"thread {thread} is mid-run; looking again later")
            elif values.get("round") == round_id and values.get("ticket_id"):
                work = threads.Work(thread, str(values["ticket_id"]), None, trigger, None)
                start = {**work.start(), "covered": before, "cause": REDRAFT_AFTER_WITHDRAWAL}
                await self.runs.after(await self.runs.run(start, config))

    async def _answered_meanwhile(self, thread: str, sent_round: str, sent_through: Any) -> None:
        """A reply went out for `sent_round` after the thread had moved on to a draft that
        answers that round's messages too (the customer wrote again before the decision
        reached the drafter): redraft it to answer only what came after the sent reply."""
        if not isinstance(sent_through, str) or not sent_through:
            return  # a sender that does not say what its reply answered
        config = self.runs.config(thread)

        async def answers_it_again() -> bool:
            state = await self.runs.state(config)
            if not state.interrupts:
                return False
            item = InboxItem.model_validate(state.interrupts[0].value)
            # not the draft the reply was sent for, and answering that round's messages
            return item.round != sent_round and sent_round in item.round_messages

        if not await answers_it_again():  # the usual case, read without taking the lease
            return
        async with self.runs.lease(thread):
            await self.runs.finish_cut_off(config)
            if not await answers_it_again():  # another worker moved the thread on meanwhile
                return
            resume = {"type": "refresh", "cause": REDRAFT_AFTER_SENT}
            update = {"covered": sent_through}
            await self.runs.after(
                await self.runs.run(Command(resume=resume, update=update), config)
            )
