"""A thread's runs of the graph: one worker at a time (a lease in the processed-ledger), a run
until the thread waits for a reviewer, ends or fails, a run the process died in finished before
anything else touches the thread, and what a run that stopped leaves to publish."""

from __future__ import annotations

import logging
from contextlib import AbstractAsyncContextManager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot

from shared.errors import BusinessReject, PermanentError
from shared.inbox import InboxItem
from shared.ledger import Ledger

from . import metrics
from .graph import DURABILITY, Deps
from .publisher import Publisher

log = logging.getLogger(__name__)

# The task id under which LangGraph stores a command's resume value and state update before
# the step they feed runs (`langgraph._internal._constants.NULL_TASK_ID`, private there).
COMMAND_WRITES = "00000000-0000-0000-0000-000000000000"
INTERRUPT, ERROR = "__interrupt__", "__error__"  # pending writes that are not a step's result


class Runs:
    def __init__(
        self,
        graph: CompiledStateGraph[Any, Any, Any, Any],
        deps: Deps,
        ledger: Ledger,
        publisher: Publisher,
        *,
        lease_ttl: float,
        lease_wait: float,
    ) -> None:
        self.graph = graph
        self.deps = deps
        self.ledger = ledger
        self.publisher = publisher
        self.lease_ttl = lease_ttl
        self.lease_wait = lease_wait

    @staticmethod
    def config(thread: str) -> RunnableConfig:
        return RunnableConfig(configurable={"thread_id": thread})

    def lease(self, thread: str) -> AbstractAsyncContextManager[None]:
        """The thread to this worker alone for the block."""
        return self.ledger.lease(f"thread:{thread}", ttl=self.lease_ttl, wait=self.lease_wait)

    async def state(self, config: RunnableConfig) -> StateSnapshot:
        return await self.graph.aget_state(config)

    async def run(self, graph_input: Any, config: RunnableConfig) -> dict[str, Any]:
        """Run the thread until it waits for a reviewer, ends or fails; its values then (with
        `__interrupt__` while it waits). Saved when it stops (`DURABILITY`): nothing of a run
        leaves the drafter before then, so a crash after the draft is saved never calls the
        model again, and one before leaves nothing half done."""
        out = await self.graph.ainvoke(
            graph_input, config, context=self.deps, durability=DURABILITY
        )
        return dict(out)

    async def finish_cut_off(self, config: RunnableConfig) -> bool:
        """Finish a run the process died in before anything else touches the thread.

        Two moments leave pending writes on the latest checkpoint that only a run with no
        input (`ainvoke(None)`) applies: a command whose resume value and state update were
        stored but whose step had not run (a second command would write the same keys again,
        which LangGraph refuses on this and every later attempt: InvalidUpdateError "Can
        receive only one value per step"), and a step whose nodes had all written but whose
        checkpoint had not (the state then shows no next node and no interrupt, and the thread
        looks finished). Either way the thread would be stuck for good. What the cut-off
        handler would have published next goes out now (idempotent ids). (Runs saved only
        when they stop, as `run`'s are, leave neither; threads saved per step before do.)

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
        values = await self.run(None, config)
        if values.get(INTERRUPT):
            await self.publisher.emit(InboxItem.model_validate(values[INTERRUPT][0].value))
        else:
            await self.withdrawal(values)
        return True

    async def withdrawal(self, values: dict[str, Any]) -> None:
        """Publish the withdrawal a thread that ended withdrawn owes (idempotent id): its run
        and the publish that follows it are two steps, and a drafter may die between them."""
        if values.get("outcome") != "withdrawn" or not values.get("item"):
            return
        item = InboxItem.model_validate(values["item"])
        status = None  # the ticket's status now, as a withdrawal says it
        if values.get("inline_ticket") is None and item.ticket_id:
            try:
                status = (await self.deps.source.get_ticket(item.ticket_id)).status
            except PermanentError:
                pass  # gone from the helpdesk
        await self.publisher.withdraw(item, str(values.get("withdrawn") or ""), status)

    async def after(self, values: dict[str, Any]) -> None:
        """What a run that stopped leaves to do: publish the item it waits on, or say how the
        thread finished."""
        if values.get(INTERRUPT):
            await self.publisher.emit(InboxItem.model_validate(values[INTERRUPT][0].value))
            return
        outcome = values.get("outcome") or "finished"
        metrics.OUTCOMES.labels(outcome).inc()
        if outcome == "closed":
            raise BusinessReject("the ticket is closed: no draft", outcome="closed")
        if outcome == "quiet":
            raise BusinessReject("nothing in the conversation waits for a reply", outcome="quiet")
        log.info("thread finished: %s", outcome, extra={"thread_id": values.get("thread")})
