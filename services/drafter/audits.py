"""A person's audit of an auto-sent reply reaches the drafter: found fine, the reply becomes an
example for later drafts like one a person approved; found edited, it is dropped.

The notice (`inbox.audited`, which only the inbox may publish) is believed no further than the
thread's own record: the auto-sent reply its auto decision finished the round with, held by
`memory.hold` under the thread and round, with the item id and version it was sent as, and the
sender's word (`reply.sent`, on a subject only the sender may publish) that it went out. An
audit of anything else (a draft still waiting, a reply a person approved, another version, a
reply the sender withdrew) finds no such record and plants nothing; a fine audit of a reply
not reported sent waits for that report (and is dead-lettered if it never comes). A
redelivered notice finds the record gone and the example already written under the round's
key.
"""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph

from shared import ids
from shared.consumer import Delivery
from shared.envelope import Envelope
from shared.errors import BusinessReject, TransientError
from shared.inbox import Audited, InboxItem
from shared.ledger import Ledger

from . import memory

log = logging.getLogger(__name__)


class Audits:
    def __init__(
        self,
        graph: CompiledStateGraph[Any, Any, Any, Any],
        ledger: Ledger,
        *,
        lease_ttl: float,
        lease_wait: float,
    ) -> None:
        self.graph = graph
        self.ledger = ledger
        self.lease_ttl = lease_ttl
        self.lease_wait = lease_wait

    async def on_audit(self, delivery: Delivery[Envelope, Audited]) -> None:
        audit = delivery.payload  # checked by the runtime (Consumer.payload)
        store = self.graph.store
        if store is None:
            return  # a drafter that remembers nothing
        async with self.ledger.lease(
            f"thread:{audit.thread}", ttl=self.lease_ttl, wait=self.lease_wait
        ):
            found = await memory.held(
                store, audit.thread, audit.round, item=audit.item_id, version=audit.version
            )
            if found is not None:
                fine = audit.verdict == "fine"
                if fine and not (found.get("sent") or await self._sent(audit)):
                    # the sender has not said it went out (yet: its word may be on its way)
                    raise TransientError(f"{audit.item_id} is not reported sent")
                await memory.audited(store, audit.thread, audit.round, fine=fine)
                log.info(
                    "auto-sent reply %s audited %s%s",
                    audit.item_id,
                    audit.verdict,
                    ": kept as an example" if fine else "",
                )
                return
            config = RunnableConfig(configurable={"thread_id": audit.thread})
            state = await self.graph.aget_state(config)
            waiting = state.interrupts and (
                InboxItem.model_validate(state.interrupts[0].value).id == audit.item_id
            )
            if waiting or (state.next and not state.interrupts):
                # the auto decision on it has not finished the round here yet (it is on its
                # way, or the run it resumed was cut off): its record is not written yet
                raise TransientError(f"{audit.item_id} is not finished here yet")
        raise BusinessReject(
            f"{audit.thread} holds no auto-sent reply sent as {audit.item_id} for an audit"
            " (none was, it was withdrawn, or it was audited already)",
            outcome="not_auto_sent",
        )

    async def _sent(self, audit: Audited) -> bool:
        """The sender's `reply.sent` for the round reached the drafter before the reply was
        held (it is remembered for a week: `Drafter.on_result`)."""
        return await self.ledger.seen(ids.sent(audit.thread, audit.round))
