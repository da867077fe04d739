"""Pipeline throughput and latency on the whole stack, against the drafter's graph alone.

Starts the real system (`desk up`: embedded nats-server with its default `sync_interval: always`,
SQLite, the built-in offline draft model, the outbox channel), then:

1. **graph alone**: the drafter's compiled graph with the same SQLite checkpointer, run in this
   process from invoke to interrupt for M tickets in a row — the stage no design can skip, and
   the reference the pipeline's rate is compared with;
2. **latency**: L signed ticket webhooks offered at a steady rate (default 50/s, where the
   latency target is set), each timed from its 202 to the item visible in the inbox API;
3. **throughput**: N webhooks sent as fast as ingress takes them; events/s from the first 202 to
   the last item visible, with the same latency figures (here mostly queueing);
4. **decisions**: an `accept` for each of those N items through the API; decisions/s and
   latency from the decision's 202 to its `reply.sent` event;
5. per-stage throughput read from the broker's own timestamps (ingress → EVENTS, router →
   WORK, drafter → inbox.item, projection → visible in the API, API → inbox.decision, sender →
   reply.sent), naming the slowest stage; every process's CPU per event and per decision
   (the services, the broker, this load generator); and every service's memory.

    python -m benchmarks.pipeline [--events N] [--latency-events L] [--rate R] [--json PATH]
"""

from .figures import stage_rate, stamps
from .measure import run, throughput_only
from .phases import decisions_phase, session
from .report import table
from .stack import Rig, log, replica, run_with_stack
from .tickets import FIRST_TICKET, add_tickets, signed_requests
from .traffic import decide_all, send_all, waiting_items
from .watch import THROUGHPUT_POLL

__all__ = [
    "FIRST_TICKET",
    "THROUGHPUT_POLL",
    "Rig",
    "add_tickets",
    "decide_all",
    "decisions_phase",
    "log",
    "replica",
    "run",
    "run_with_stack",
    "send_all",
    "session",
    "signed_requests",
    "stage_rate",
    "stamps",
    "table",
    "throughput_only",
    "waiting_items",
]
