"""The drafter's two handlers: a work item starts or continues a thread; a decision resumes it.

Per thread, one worker at a time (a lease in the processed-ledger); what the thread already
did is read from its checkpoint first, so a duplicate event, a second event for the same
ticket, or a redelivery after a crash never drafts twice:

| thread state              | work item                      | decision                    |
|---------------------------|--------------------------------|-----------------------------|
| none                      | start                          | refuse (not waiting)        |
| waiting for review        | re-emit the current item       | resume (if version current) |
| failed or killed mid-way  | resume from the failed node    | resume from the failed node |
| finished (has an outcome) | start again only if newer      | refuse (not waiting)        |
| started, nothing done yet | start                          | refuse (not waiting)        |
"""

from __future__ import annotations

import logging
import time
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command
from pydantic import ValidationError

from shared import headers as h
from shared import ids, subjects
from shared.bus import Bus
from shared.consumer import Delivery
from shared.envelope import Envelope
from shared.errors import BusinessReject, PermanentError
from shared.inbox import Decision, InboxItem
from shared.ledger import Ledger

from . import metrics, threads
from .graph import Deps

log = logging.getLogger(__name__)

SOURCE = "/desk/drafter"


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
        work = threads.work_for(delivery.body)
        started = time.monotonic()
        config = self.config(work.thread)
        async with self.ledger.lease(
            f"thread:{work.thread}", ttl=self.lease_ttl, wait=self.lease_wait
        ):
            state = await self.graph.aget_state(config)
            if state.interrupts:
                await self._emit(InboxItem.model_validate(state.interrupts[0].value))
                metrics.OUTCOMES.labels("duplicate").inc()
                return
            finished = bool(state.values.get("outcome"))
            if state.next:
                await self._run(None, config)  # resume from the node that failed
            elif finished and not threads.newer(work.version, state.values.get("handled_version")):
                metrics.OUTCOMES.labels("duplicate").inc()
                raise BusinessReject(
                    f"thread {work.thread} already handled this ticket version", outcome="duplicate"
                )
            else:
                # a new thread, a newer ticket version, or a start killed before its first step
                await self._run(work.start(), config)
            await self._after(config)
        metrics.DRAFT_SECONDS.observe(time.monotonic() - started)

    async def on_decision(self, delivery: Delivery[Envelope]) -> None:
        try:
            decision = Decision.model_validate(delivery.body.data)
        except ValidationError as exc:
            raise PermanentError(f"not a decision: {exc.errors()[0]['msg']}") from None
        config = self.config(decision.thread)
        async with self.ledger.lease(
            f"thread:{decision.thread}", ttl=self.lease_ttl, wait=self.lease_wait
        ):
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
                await self._run(Command(resume=decision.model_dump(mode="json")), config)
            elif state.next:
                await self._run(None, config)
            else:
                raise BusinessReject(
                    f"thread {decision.thread} is not waiting for a decision", outcome="not_waiting"
                )
            await self._after(config)

    async def _run(self, graph_input: Any, config: RunnableConfig) -> None:
        # durability="sync": each node's result is on disk before the next starts, so a crash
        # after the model call never calls the model again.
        await self.graph.ainvoke(graph_input, config, context=self.deps, durability="sync")

    async def _after(self, config: RunnableConfig) -> None:
        state = await self.graph.aget_state(config)
        if state.interrupts:
            await self._emit(InboxItem.model_validate(state.interrupts[0].value))
            return
        outcome = state.values.get("outcome") or "finished"
        metrics.OUTCOMES.labels(outcome).inc()
        if outcome == "closed":
            raise BusinessReject("the ticket is closed: no draft", outcome="closed")
        log.info("thread finished: %s", outcome, extra={"thread_id": state.values.get("thread")})

    async def _emit(self, item: InboxItem) -> None:
        msg_id = ids.inbox_item(item.thread, item.version)
        envelope = Envelope(
            id=msg_id,
            source=SOURCE,
            type=subjects.INBOX_ITEM,
            subject=item.thread,
            time=item.created_at,  # the same bytes however often the item is re-emitted
            correlationid=item.trigger.event_id,
            data=item.model_dump(mode="json"),
        )
        published = await self.bus.publish(
            subjects.INBOX_ITEM,
            envelope.to_bytes(),
            msg_id=msg_id,
            headers={h.CORRELATION_ID: item.trigger.event_id},
        )
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
