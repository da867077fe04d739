"""A work item (any ticket event, or a mail) on its thread: the round it starts, or what the
thread, as it stands, does with the ticket's news.

A thread is a ticket's conversation. Per thread, one worker at a time (a lease in the
processed-ledger); what the thread already did is read from its checkpoint, and the ticket as it
is now from the helpdesk, so a duplicate event, a second event for the same round, or a
redelivery after a crash never drafts twice, and a new customer message always gets its round:

| thread state              | work item (any ticket event)                                |
|---------------------------|-------------------------------------------------------------|
| none                      | start: draft the open round (none open: nothing to do)     |
| waiting for review        | closed or answered in the helpdesk → withdraw the draft;    |
|                           | the customer wrote again → redraft the round (new version); |
|                           | a stale reminder → mark the draft overdue; else re-emit it  |
| failed or killed mid-way  | resume from the failed node, then look again                |
| finished                  | a new open round → start it; a stale reminder on a ticket   |
|                           | waiting on the customer → one follow-up a day; else nothing |

What the sender says about an approved reply (sent, or withdrawn because the customer wrote
again) bears on the next round: `results`.
"""

from __future__ import annotations

import time
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from shared import conversation, ids
from shared.consumer import Delivery
from shared.envelope import Envelope
from shared.errors import BusinessReject, TransientError
from shared.helpdesk.base import Ticket
from shared.inbox import InboxItem
from shared.ledger import Ledger

from . import metrics, retention, threads
from .graph import Deps
from .participants import Participants
from .publisher import Publisher
from .results import Results
from .runs import Runs

REMINDED_TTL = 2 * 24 * 3600.0  # a day's reminder key outlives its day


class Rounds:
    def __init__(
        self,
        runs: Runs,
        publisher: Publisher,
        results: Results,
        participants: Participants,
        deps: Deps,
        ledger: Ledger,
    ) -> None:
        self.runs = runs
        self.publisher = publisher
        self.results = results
        self.participants = participants
        self.deps = deps
        self.ledger = ledger

    async def on_work(self, delivery: Delivery[Envelope]) -> None:
        if self.deps.limiter is None:
            return await self._work(delivery)
        async with self.deps.limiter.ahead():
            return await self._work(delivery)

    async def _work(self, delivery: Delivery[Envelope]) -> None:
        """The event's thread, under its lease, as it stands: new, failed or killed mid-way,
        waiting for review, or finished (the table above)."""
        work = threads.work_for(delivery.body, delivery.stream_seq)
        if work.kind == "mail":
            work = await self.participants.thread_of(work)
        started = time.monotonic()
        config = self.runs.config(work.thread)
        async with self.runs.lease(work.thread):
            if not await self.runs.finish_cut_off(config):  # no checkpoint: a new thread
                await self._start(work, config)
                metrics.DRAFT_SECONDS.observe(time.monotonic() - started)
                return
            state = await self.runs.state(config)
            if state.next and not state.interrupts:
                await self.runs.after(await self.runs.run(None, config))  # resume the failed node
                state = await self.runs.state(config)
            if state.interrupts:
                await self._waiting(
                    work, config, InboxItem.model_validate(state.interrupts[0].value)
                )
            elif state.values.get("outcome") or state.values.get("round") is not None:
                await self._finished(work, config, state.values)
            else:  # a start that saved nothing of its own
                await self._start(work, config)
        metrics.DRAFT_SECONDS.observe(time.monotonic() - started)

    async def _start(self, work: threads.Work, config: RunnableConfig) -> None:
        """The first run of a thread."""
        plan = None
        if work.kind == "stale" and work.day is not None:  # first heard of by a reminder
            ticket = await self._ticket(work, None)
            plan = self._reminder(ticket, {}, work.day)
        # a thread deleted after its retention period continues its count of versions
        left = await retention.memo(self.ledger, work.thread)
        await self.runs.after(await self.runs.run({**work.start(plan), **left}, config))

    async def _waiting(self, work: threads.Work, config: RunnableConfig, item: InboxItem) -> None:
        """A ticket event while a draft waits for a reviewer."""
        # the item first (idempotent): its publish may have been cut off by a crash, and the
        # notices below are about it
        await self.publisher.emit(item)
        ticket = await self._ticket(work, item)
        change = conversation.change_since(ticket, item.seen_through)
        if change and await self.ledger.seen(ids.sent(item.thread, item.round)):
            # its reply went out: the thread ends with that decision, which has not reached
            # this drafter yet; what the ticket says now is for the thread after it
            raise TransientError(
                f"the reply to {item.id} went out; waiting for its decision to finish the thread"
            )
        if change in ("closed", "answered"):
            reason = conversation.REASONS[change]
            resume = {"type": "withdraw", "reason": reason}
            values = await self.runs.run(Command(resume=resume, update=self._news(work)), config)
            await self.publisher.withdraw(item, reason, ticket.status)
            metrics.OUTCOMES.labels("withdrawn").inc()
            if change == "answered":  # the customer may have written after that answer
                found = conversation.open_round(ticket, covered=values.get("covered"))
                if found is not None and found.id != values.get("round"):
                    await self.runs.after(await self.runs.run(work.start(), config))
            return
        if change == "customer_wrote":
            cause = conversation.REASONS[change]
            resume = {"type": "refresh", "cause": cause}
            await self.runs.after(
                await self.runs.run(Command(resume=resume, update=self._news(work)), config)
            )
            return
        made_by_this = item.trigger.event_id == work.trigger["event_id"]  # its redelivery
        if work.kind == "stale" and work.day is not None and not made_by_this:
            # before the notice: the same reminder delivered again (its notice's publish was
            # not acknowledged, say) once the draft has been decided meanwhile is done with,
            # not a reason to draft the round again; while the draft still waits, a
            # redelivery publishes the notice again (idempotent id)
            await self.ledger.claim(ids.reminded(work.thread, work.day), ttl=REMINDED_TTL)
            await self.publisher.overdue(item, work.day)
            metrics.OUTCOMES.labels("overdue").inc()
            return
        metrics.OUTCOMES.labels("duplicate").inc()  # a duplicate or a redelivery

    async def _finished(
        self, work: threads.Work, config: RunnableConfig, values: dict[str, Any]
    ) -> None:
        """A ticket event on a thread whose last round is closed (or had nothing to answer)."""
        # first what the run that finished it owed: the withdrawal of its draft, whose publish
        # a crash (or a broker that refused it) may have cut off; this is its redelivery
        await self.runs.withdrawal(values)
        ticket = await self._ticket(work, None, values.get("ticket"))
        if ticket.status == "closed":
            metrics.OUTCOMES.labels("closed").inc()
            raise BusinessReject("the ticket is closed: no draft", outcome="closed")
        found = conversation.open_round(ticket, covered=values.get("covered"))
        if found is not None and found.id != values.get("round"):
            await self.results.settled(work.thread, values)
            # the customer wrote again
            await self.runs.after(await self.runs.run(work.start(), config))
            return
        if work.kind == "stale" and work.day is not None:
            if await self.ledger.seen(ids.reminded(work.thread, work.day)):
                metrics.OUTCOMES.labels("duplicate").inc()
                raise BusinessReject(
                    "this reminder marked the draft overdue already", outcome="duplicate"
                )
            plan = self._reminder(ticket, values, work.day)
            if plan is not None:
                await self.runs.after(await self.runs.run(work.start(plan), config))
                return
        metrics.OUTCOMES.labels("duplicate").inc()
        raise BusinessReject(f"thread {work.thread} has nothing new to answer", outcome="duplicate")

    @staticmethod
    def _news(work: threads.Work) -> dict[str, Any]:
        """What the event that moved a waiting thread on brings into its state."""
        update: dict[str, Any] = {"trigger": work.trigger}
        if work.inline_ticket is not None:
            update["inline_ticket"] = work.inline_ticket
        return update

    @staticmethod
    def _reminder(ticket: Ticket, values: dict[str, Any], day: Any) -> dict[str, Any] | None:
        """What a stale reminder drafts on a finished thread, if anything: one follow-up a day
        on a ticket waiting on the customer; the round again if its draft was ignored."""
        followup = conversation.followup_round(day)
        if values.get("round") == followup:
            return None  # today's follow-up exists already
        replied = values.get("outcome") in ("accepted", "edited")
        if conversation.waiting_on_customer(ticket) or (
            replied and conversation.open_round(ticket, covered=values.get("covered")) is None
        ):
            return {"kind": "followup", "id": followup}
        if values.get("outcome") in ("ignored", "acknowledged", "quiet", ""):
            return {"kind": "reminder"}
        return None

    async def _ticket(
        self, work: threads.Work, item: InboxItem | None, earlier: Any = None
    ) -> Ticket:
        """The ticket as it is now: from the helpdesk, or a mail conversation as it stands."""
        if work.inline_ticket is not None:
            base = Ticket.model_validate(work.inline_ticket)
            history = item.conversation if item is not None else None
            if history is None and isinstance(earlier, dict):
                history = Ticket.model_validate(earlier).messages
            known = {m.id for m in history or []}
            messages = [*(history or []), *(m for m in base.messages if m.id not in known)]
            return base.model_copy(update={"messages": messages})
        return await self.deps.source.get_ticket(work.ticket_id)
