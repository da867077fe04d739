"""A reviewer's decision resumes a waiting thread if it is on the current version; anything
else is refused."""

from __future__ import annotations

from langgraph.types import Command

from shared.consumer import Delivery
from shared.envelope import Envelope
from shared.errors import BusinessReject
from shared.inbox import Decision, InboxItem

from . import metrics
from .publisher import Publisher
from .runs import Runs


class Decisions:
    def __init__(self, runs: Runs, publisher: Publisher) -> None:
        self.runs = runs
        self.publisher = publisher

    async def on_decision(self, delivery: Delivery[Envelope, Decision]) -> None:
        decision = delivery.payload  # checked by the runtime (Consumer.payload)
        config = self.runs.config(decision.thread)
        async with self.runs.lease(decision.thread):
            await self.runs.finish_cut_off(config)
            state = await self.runs.state(config)
            if state.interrupts:
                current = state.values.get("version")
                item = InboxItem.model_validate(state.interrupts[0].value)
                if decision.version != current:
                    # The redraft this decision caused may have been cut off before its item
                    # was published (a crash after the checkpoint): make sure it is out.
                    await self.publisher.emit(item)
                    metrics.OUTCOMES.labels("superseded").inc()
                    raise BusinessReject(
                        f"decision on v{decision.version}; the thread is at v{current}",
                        outcome="superseded",
                    )
                if not item.config.allows(decision.type):
                    raise BusinessReject(
                        f"{decision.type} is not allowed on this item", outcome="not_allowed"
                    )
                ran = await self.runs.run(Command(resume=decision.model_dump(mode="json")), config)
            elif state.next:
                ran = await self.runs.run(None, config)
            else:
                raise BusinessReject(
                    f"thread {decision.thread} is not waiting for a decision", outcome="not_waiting"
                )
            await self.runs.after(ran)
