"""The drafter's two handlers: a work item starts or continues a thread; a decision resumes it.

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

A decision resumes a waiting thread if it is on the current version; anything else is refused.
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
import logging
import time
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command

from shared import clock, conversation, ids, mail, subjects
from shared.bus import Bus
from shared.consumer import Delivery
from shared.envelope import Envelope
from shared.errors import BusinessReject, PermanentError, TransientError, Unavailable
from shared.helpdesk.base import Ticket
from shared.inbox import SEND_REPLY, Decision, InboxItem, Overdue, Withdrawal
from shared.ledger import Ledger
from shared.results import REPLY_SENT, REPLY_WITHDRAWN

from . import memory, metrics, retention, threads
from .graph import DURABILITY, Deps

log = logging.getLogger(__name__)

SOURCE = "/desk/drafter"
REDRAFT_AFTER_WITHDRAWAL = "the approved reply was withdrawn: the customer wrote again"
REDRAFT_AFTER_SENT = "the reply to the earlier messages went out: this answers what came after"
# The task id under which LangGraph stores a command's resume value and state update before
# the step they feed runs (`langgraph._internal._constants.NULL_TASK_ID`, private there).
COMMAND_WRITES = "00000000-0000-0000-0000-000000000000"
INTERRUPT, ERROR = "__interrupt__", "__error__"  # pending writes that are not a step's result
REMINDED_TTL = 2 * 24 * 3600.0  # a day's reminder key outlives its day
SENT_TTL = 7 * 24 * 3600.0  # a sent reply's decision reaches the drafter well within that
# how long after its decision an approved reply's fate (sent or withdrawn) is waited for before
# a new round starts without it (a sender that never says: the round's draft goes ahead)
SETTLE_WAIT = 120.0


class Drafter:
    def __init__(
        self,
        bus: Bus,
        graph: CompiledStateGraph[Any, Any, Any, Any],
        deps: Deps,
        ledger: Ledger,
        lease_ttl: float,
        lease_wait: float,
    ) -> None:
        self.bus = bus
        self.graph = graph
        self.deps = deps
        self.ledger = ledger
        self.lease_ttl = lease_ttl
        self.lease_wait = lease_wait

    @staticmethod
    def config(thread: str) -> RunnableConfig:
        return RunnableConfig(configurable={"thread_id": thread})

    async def on_work(self, delivery: Delivery[Envelope]) -> None:
        if self.deps.limiter is None:
            return await self._work(delivery)
        async with self.deps.limiter.ahead():
            return await self._work(delivery)

    async def _work(self, delivery: Delivery[Envelope]) -> None:
        work = threads.work_for(delivery.body, delivery.stream_seq)
        if work.kind == "mail":
            work = await self._mail_thread(work)
        started = time.monotonic()
        config = self.config(work.thread)
        async with self.ledger.lease(
            f"thread:{work.thread}", ttl=self.lease_ttl, wait=self.lease_wait
        ):
            if not await self._finish_cut_off(config):  # no checkpoint: a new thread
                await self._start(work, config)
                metrics.DRAFT_SECONDS.observe(time.monotonic() - started)
                return
            state = await self.graph.aget_state(config)
            if state.next and not state.interrupts:
                await self._after(await self._run(None, config))  # resume the failed node
                state = await self.graph.aget_state(config)
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
        await self._after(await self._run({**work.start(plan), **left}, config))

    async def on_result(self, delivery: Delivery[Envelope]) -> None:
        """`reply.sent`: remembered, for a draft whose decision is still on its way (see
        `_waiting`). `reply.withdrawn`: an approved reply did not go out. It is no example of a
        sent reply; and if the customer wrote again before it went out, its round is owed an
        answer."""
        data = delivery.body.data
        if not isinstance(data, dict):
            return
        thread, round_id = str(data.get("thread") or ""), str(data.get("round") or "")
        if not thread or not round_id:
            return
        if delivery.body.type == REPLY_SENT:
            await self.ledger.claim(ids.sent(thread, round_id), ttl=SENT_TTL)
            if self.graph.store is not None:  # an auto-sent reply held for its audit went out
                await memory.sent(self.graph.store, thread, round_id)
            await self._answered_meanwhile(thread, round_id, data.get("seen_through"))
            return
        if delivery.body.type != REPLY_WITHDRAWN:
            return
        if self.graph.store is not None:  # it never went out: no example of what was sent
            await memory.forget(self.graph.store, thread, round_id)
        if data.get("reason") == conversation.REASONS["customer_wrote"]:
            await self._owed_again(thread, round_id, delivery.body.id)
        # done with (a new round waits for this, `_settled`); closed, or a person answered:
        # nothing of ours is owed
        await self.ledger.claim(ids.unsent(thread, round_id), ttl=SENT_TTL)

    async def _owed_again(self, thread: str, round_id: str, event_id: str) -> None:
        """An approved reply withdrawn because the customer wrote again: its round's messages
        are owed an answer, in the waiting draft or in the round drafted again."""
        config = self.config(thread)
        async with self.ledger.lease(f"thread:{thread}", ttl=self.lease_ttl, wait=self.lease_wait):
            await self._finish_cut_off(config)
            state = await self.graph.aget_state(config)
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
                await self._after(await self._run(Command(resume=resume, update=update), config))
            elif state.next:
                raise TransientError(f"thread {thread} is mid-run; looking again later")
            elif values.get("round") == round_id and values.get("ticket_id"):
                work = threads.Work(thread, str(values["ticket_id"]), None, trigger, None)
                start = {**work.start(), "covered": before, "cause": REDRAFT_AFTER_WITHDRAWAL}
                await self._after(await self._run(start, config))

    async def _answered_meanwhile(self, thread: str, sent_round: str, sent_through: Any) -> None:
        """A reply went out for `sent_round` after the thread had moved on to a draft that
        answers that round's messages too (the customer wrote again before the decision
        reached the drafter): redraft it to answer only what came after the sent reply."""
        if not isinstance(sent_through, str) or not sent_through:
            return  # a sender that does not say what its reply answered
        config = self.config(thread)

        async def answers_it_again() -> bool:
            state = await self.graph.aget_state(config)
            if not state.interrupts:
                return False
            item = InboxItem.model_validate(state.interrupts[0].value)
            # not the draft the reply was sent for, and answering that round's messages
            return item.round != sent_round and sent_round in item.round_messages

        if not await answers_it_again():  # the usual case, read without taking the lease
            return
        async with self.ledger.lease(f"thread:{thread}", ttl=self.lease_ttl, wait=self.lease_wait):
            await self._finish_cut_off(config)
            if not await answers_it_again():  # another worker moved the thread on meanwhile
                return
            resume = {"type": "refresh", "cause": REDRAFT_AFTER_SENT}
            update = {"covered": sent_through}
            await self._after(await self._run(Command(resume=resume, update=update), config))

    async def _waiting(self, work: threads.Work, config: RunnableConfig, item: InboxItem) -> None:
        """A ticket event while a draft waits for a reviewer."""
        # the item first (idempotent): its publish may have been cut off by a crash, and the
        # notices below are about it
        await self._emit(item)
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
            values = await self._run(Command(resume=resume, update=self._news(work)), config)
            await self._withdraw(item, reason, ticket.status)
            metrics.OUTCOMES.labels("withdrawn").inc()
            if change == "answered":  # the customer may have written after that answer
                found = conversation.open_round(ticket, covered=values.get("covered"))
                if found is not None and found.id != values.get("round"):
                    await self._after(await self._run(work.start(), config))
            return
        if change == "customer_wrote":
            cause = conversation.REASONS[change]
            resume = {"type": "refresh", "cause": cause}
            await self._after(
                await self._run(Command(resume=resume, update=self._news(work)), config)
            )
            return
        made_by_this = item.trigger.event_id == work.trigger["event_id"]  # its redelivery
        if work.kind == "stale" and work.day is not None and not made_by_this:
            # before the notice: the same reminder delivered again (its notice's publish was
            # not acknowledged, say) once the draft has been decided meanwhile is done with,
            # not a reason to draft the round again; while the draft still waits, a
            # redelivery publishes the notice again (idempotent id)
            await self.ledger.claim(ids.reminded(work.thread, work.day), ttl=REMINDED_TTL)
            await self._overdue(item, work.day)
            metrics.OUTCOMES.labels("overdue").inc()
            return
        metrics.OUTCOMES.labels("duplicate").inc()  # a duplicate or a redelivery

    async def _finished(
        self, work: threads.Work, config: RunnableConfig, values: dict[str, Any]
    ) -> None:
        """A ticket event on a thread whose last round is closed (or had nothing to answer)."""
        ticket = await self._ticket(work, None, values.get("ticket"))
        if ticket.status == "closed":
            metrics.OUTCOMES.labels("closed").inc()
            raise BusinessReject("the ticket is closed: no draft", outcome="closed")
        found = conversation.open_round(ticket, covered=values.get("covered"))
        if found is not None and found.id != values.get("round"):
            await self._settled(work.thread, values)
            await self._after(await self._run(work.start(), config))  # the customer wrote again
            return
        if work.kind == "stale" and work.day is not None:
            if await self.ledger.seen(ids.reminded(work.thread, work.day)):
                metrics.OUTCOMES.labels("duplicate").inc()
                raise BusinessReject(
                    "this reminder marked the draft overdue already", outcome="duplicate"
                )
            plan = self._reminder(ticket, values, work.day)
            if plan is not None:
                await self._after(await self._run(work.start(plan), config))
                return
        metrics.OUTCOMES.labels("duplicate").inc()
        raise BusinessReject(f"thread {work.thread} has nothing new to answer", outcome="duplicate")

    async def _settled(self, thread: str, values: dict[str, Any]) -> None:
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

    async def _mail_thread(self, work: threads.Work) -> threads.Work:
        """A reply mail joins the conversation of a mail it answers only if its sender takes
        part in it (started it, or joined it so); otherwise it is a conversation of its own and
        the reviewer is told which conversation it claimed. Each mail's Message-ID is
        remembered with its conversation per sender (first writer wins, so replicas agree), and
        for anyone (first writer wins) to name the conversation a stranger claims."""
        assert work.mail_id is not None and work.mail_from is not None
        sender = work.mail_from
        mine = ids.mail(f"{sender}\n{work.mail_id}")
        thread, claimed = work.thread, None
        for parent in work.mail_parents:
            for key in (ids.mail(f"{sender}\n{parent}"), ids.mail(parent)):
                found = await self.ledger.get(key)
                if not found:
                    continue
                if await self._takes_part(found.decode(), sender):
                    thread = found.decode()
                    break
                claimed = claimed or found.decode()
            if thread != work.thread:
                break
        known = await self.ledger.get(mine)  # this mail, seen before (a redelivery, a copy)
        thread = known.decode() if known else thread
        # the sender first: whenever its Message-ID names the conversation, it takes part
        await self.ledger.claim(ids.mail_participant(thread, sender))
        if not await self.ledger.claim(mine, thread.encode()):
            thread = (await self.ledger.get(mine) or thread.encode()).decode()
        await self.ledger.claim(ids.mail(work.mail_id), thread.encode())
        if thread != work.thread:
            return work.in_thread(thread)
        return work.noting(threads.claimed_note(claimed)) if claimed else work

    async def _takes_part(self, thread: str, sender: str) -> bool:
        """Whether `sender` (normalised) started the mail conversation or joined it. A
        conversation from before participants were recorded: its customer is who started it."""
        if await self.ledger.seen(ids.mail_participant(thread, sender)):
            return True
        values = (await self.graph.aget_state(self.config(thread))).values or {}
        customer = (values.get("ticket") or values.get("inline_ticket") or {}).get("customer")
        email = customer.get("email") if isinstance(customer, dict) else None
        return isinstance(email, str) and mail.normal_address(email) == sender

    async def on_decision(self, delivery: Delivery[Envelope]) -> None:
        decision: Decision = delivery.payload  # checked by the runtime (Consumer.payload)
        config = self.config(decision.thread)
        async with self.ledger.lease(
            f"thread:{decision.thread}", ttl=self.lease_ttl, wait=self.lease_wait
        ):
            await self._finish_cut_off(config)
            state = await self.graph.aget_state(config)
            if state.interrupts:
                current = state.values.get("version")
                item = InboxItem.model_validate(state.interrupts[0].value)
                if decision.version != current:
                    # The redraft this decision caused may have been cut off before its item
                    # was published (a crash after the checkpoint): make sure it is out.
                    await self._emit(item)
                    metrics.OUTCOMES.labels("superseded").inc()
                    raise BusinessReject(
                        f"decision on v{decision.version}; the thread is at v{current}",
                        outcome="superseded",
                    )
                if not item.config.allows(decision.type):
                    raise BusinessReject(
                        f"{decision.type} is not allowed on this item", outcome="not_allowed"
                    )
                ran = await self._run(Command(resume=decision.model_dump(mode="json")), config)
            elif state.next:
                ran = await self._run(None, config)
            else:
                raise BusinessReject(
                    f"thread {decision.thread} is not waiting for a decision", outcome="not_waiting"
                )
            await self._after(ran)

    async def _run(self, graph_input: Any, config: RunnableConfig) -> dict[str, Any]:
        """Run the thread until it waits for a reviewer, ends or fails; its values then (with
        `__interrupt__` while it waits). Saved when it stops (`DURABILITY`): nothing of a run
        leaves the drafter before then, so a crash after the draft is saved never calls the
        model again, and one before leaves nothing half done."""
        out = await self.graph.ainvoke(
            graph_input, config, context=self.deps, durability=DURABILITY
        )
        return dict(out)

    async def _finish_cut_off(self, config: RunnableConfig) -> bool:
        """Finish a run the process died in before anything else touches the thread.

        Two moments leave pending writes on the latest checkpoint that only a run with no
        input (`ainvoke(None)`) applies: a command whose resume value and state update were
        stored but whose step had not run (a second command would write the same keys again,
        which LangGraph refuses on this and every later attempt: InvalidUpdateError "Can
        receive only one value per step"), and a step whose nodes had all written but whose
        checkpoint had not (the state then shows no next node and no interrupt, and the thread
        looks finished). Either way the thread would be stuck for good. What the cut-off
        handler would have published next goes out now (idempotent ids). (Runs saved only
        when they stop, as `_run`'s are, leave neither; threads saved per step before do.)

        Whether the thread has a checkpoint at all (False: a new thread)."""
        saver = self.graph.checkpointer
        if not isinstance(saver, BaseCheckpointSaver):
            return True
        saved = await saver.aget_tuple(config)
        if saved is None:
            return False
        if not any(
            w[0] == COMMAND_WRITES or w[1] not in (INTERRUPT, ERROR)
            for w in saved.pending_writes or ()
        ):
            return True  # waiting for a reviewer, failed in a node (retried as it is), or done
        log.info(
            "finishing a run cut off mid-step",
            extra={"thread_id": config["configurable"]["thread_id"]},
        )
        values = await self._run(None, config)
        if values.get(INTERRUPT):
            await self._emit(InboxItem.model_validate(values[INTERRUPT][0].value))
        elif values.get("outcome") == "withdrawn" and values.get("item"):
            item = InboxItem.model_validate(values["item"])
            status = None  # the ticket's status now, as a withdrawal says it
            if values.get("inline_ticket") is None and item.ticket_id:
                try:
                    status = (await self.deps.source.get_ticket(item.ticket_id)).status
                except PermanentError:
                    pass  # gone from the helpdesk
            await self._withdraw(item, str(values.get("withdrawn") or ""), status)
        return True

    async def _after(self, values: dict[str, Any]) -> None:
        """What a run that stopped leaves to do: publish the item it waits on, or say how the
        thread finished."""
        if values.get(INTERRUPT):
            await self._emit(InboxItem.model_validate(values[INTERRUPT][0].value))
            return
        outcome = values.get("outcome") or "finished"
        metrics.OUTCOMES.labels(outcome).inc()
        if outcome == "closed":
            raise BusinessReject("the ticket is closed: no draft", outcome="closed")
        if outcome == "quiet":
            raise BusinessReject("nothing in the conversation waits for a reply", outcome="quiet")
        log.info("thread finished: %s", outcome, extra={"thread_id": values.get("thread")})

    async def _withdraw(self, item: InboxItem, reason: str, ticket_status: str | None) -> None:
        withdrawal = Withdrawal(
            item_id=item.id,
            thread=item.thread,
            round=item.round,
            version=item.version,
            ticket_id=item.ticket_id,
            reason=reason,
            at=dt.datetime.now(dt.UTC),
            ticket_status=ticket_status,
        )
        msg_id = ids.withdrawn(item.thread, item.round, item.version)
        await self._notice(
            subjects.INBOX_WITHDRAWN, msg_id, item, withdrawal.model_dump(mode="json")
        )
        log.info("draft %s withdrawn: %s", item.id, reason)

    async def _overdue(self, item: InboxItem, day: dt.date) -> None:
        overdue = Overdue(
            item_id=item.id,
            thread=item.thread,
            version=item.version,
            ticket_id=item.ticket_id,
            day=day,
            at=dt.datetime.now(dt.UTC),
        )
        msg_id = ids.overdue(item.thread, item.version, day)
        await self._notice(subjects.INBOX_OVERDUE, msg_id, item, overdue.model_dump(mode="json"))

    async def _notice(self, subject: str, msg_id: str, item: InboxItem, data: Any) -> None:
        envelope = Envelope(
            id=msg_id,
            source=SOURCE,
            type=subject,
            subject=item.thread,
            correlationid=item.trigger.event_id,
            data=data,
        )
        await self.bus.publish_envelope(subject, envelope)

    async def _emit(self, item: InboxItem) -> None:
        msg_id = ids.inbox_item(item.thread, item.round, item.version)
        envelope = Envelope(
            id=msg_id,
            source=SOURCE,
            type=subjects.INBOX_ITEM,
            subject=item.thread,
            time=item.created_at,  # the same bytes however often the item is re-emitted
            correlationid=item.trigger.event_id,
            data=item.model_dump(mode="json"),
        )
        published = await self.bus.publish_envelope(subjects.INBOX_ITEM, envelope)
        if published.duplicate:
            return
        kind = (
            "notify"
            if item.category == "escalation"
            else ("redraft" if item.version > 1 else "draft")
        )
        metrics.DRAFTS.labels(item.category or "other", kind).inc()
        metrics.TOKENS.labels("input").inc(item.cost.input_tokens)
        metrics.TOKENS.labels("output").inc(item.cost.output_tokens)
        metrics.COST.inc(item.cost.usd)
        log.info("inbox item %s published", msg_id, extra={"category": item.category})
