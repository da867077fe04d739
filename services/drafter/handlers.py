"""The drafter's three handlers, one collaborator each, over a thread's runs (`runs`):

- a work item starts or continues a thread (`rounds`: one work item, top to bottom);
- a reviewer's decision resumes it (`decisions`);
- the sender's word on an approved reply, and what it leaves owed (`results`).

What they publish for the inbox (items, withdrawals, overdue notices) is `publisher`'s; which
mail conversation a reply mail joins is `participants`'.
"""

from __future__ import annotations

from typing import Any

from langgraph.graph.state import CompiledStateGraph

from shared.bus import Bus
from shared.consumer import Delivery
from shared.envelope import Envelope
from shared.inbox import Decision
from shared.ledger import Ledger

from .decisions import Decisions
from .graph import Deps
from .participants import Participants
from .publisher import Publisher
from .results import Results
from .rounds import Rounds
from .runs import COMMAND_WRITES as COMMAND_WRITES  # re-exported: where tests import it from
from .runs import Runs


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
        publisher = Publisher(bus)
        runs = Runs(graph, deps, ledger, publisher, lease_ttl=lease_ttl, lease_wait=lease_wait)
        self.results = Results(runs, ledger)
        self.decisions = Decisions(runs, publisher)
        participants = Participants(runs, ledger)
        self.rounds = Rounds(runs, publisher, self.results, participants, deps, ledger)

    async def on_work(self, delivery: Delivery[Envelope]) -> None:
        await self.rounds.on_work(delivery)

    async def on_decision(self, delivery: Delivery[Envelope, Decision]) -> None:
        await self.decisions.on_decision(delivery)

    async def on_result(self, delivery: Delivery[Envelope]) -> None:
        """`reply.sent` and `reply.withdrawn`: see `Results.on_result`."""
        await self.results.on_result(delivery)
