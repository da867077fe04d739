"""The chaos harness: the real stack (`desk up`), a seeded workload, an auto-reviewer, faults.

    python -m chaos [--events N] [--seed S] [--deadline SECONDS] [--cluster] [--postgres [URL]]
                    [--keep]

1. Starts stand-ins in this process (an OpenAI-compatible LLM and a delivery channel, from
   `standins/`), then the whole stack as `python -m desk up` in a temporary var dir, pointed at
   them (`stack`).
2. Sends a bounded, seeded workload of signed ticket webhooks (`plan`, `workload`): one ticket
   per thread created in the demo helpdesk just before its first event; 20 % of sends re-send
   an earlier event (same id); 5 % name tickets that do not exist (T99xxx); some tickets get a
   second event with an OLDER version after a newer one; some tickets are created without any
   webhook, so only the reconciler can find them.
3. Conversations (chaos/conversations.py): a share of the tickets get a second customer
   message while their draft waits or after their reply was sent, an answer by a person in the
   helpdesk, or a close, each with its webhook; and two stale scans (chaos/stale.py, `desk
   reconcile --stale`) run among the faults over old tickets, some with a draft waiting.
4. An auto-reviewer (`reviewer`) decides every waiting item (accept / edit / response at most
   once per thread / ignore; notify items are ignored), deterministic per item id, except while
   a conversation step holds the ticket.
5. While that runs (`faults`): SIGKILL each of the six services once (the supervisor restarts
   them), SIGKILL nats-server once (the supervisor restarts it on the same store), make the LLM
   answer 503 for a while, make the channel answer 503 for a while. With `--cluster` the broker
   is a three-node JetStream cluster with R3 streams, and the node killed is the one leading
   the events stream at that moment. With `--postgres` every service keeps its state in a fresh
   database on a real PostgreSQL server (DESK_DATABASE_URL), and one more fault is an outage of
   it: every connection terminated, new ones refused for a few seconds, nothing restarted.
6. Waits until quiescent (`observation`) or the deadline, prints one PASS/FAIL line per
   invariant (`report`; the conversation ones from chaos/rounds/) and exits 0 only if all
   hold. The stack is always stopped (SIGINT to the supervisor). `run` ties the steps together.
"""

from .run import main

__all__ = ["main"]
