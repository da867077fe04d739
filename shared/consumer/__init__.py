"""The consumer runtime: the only code that acks, naks or terminates a message.

A consumer is declared as data (`Consumer`); the runtime fetches batches from its durable pull
consumer, runs the handler with bounded concurrency, and maps the outcome:

| handler outcome            | runtime action                                            |
|----------------------------|-----------------------------------------------------------|
| returns                    | ack                                                       |
| `BusinessReject`           | ack, counted as rejected, never retried                   |
| `TransientError` (or a bug)| nak with the retry policy's delay; on the last allowed    |
|                            | delivery: dead letter, then term                          |
| `Unavailable`, or the      | hold the message (in-progress heartbeats) and run the     |
| database unreachable       | handler again after the backoff or Retry-After: no        |
|                            | attempt spent, never dead-lettered; handed back on stop   |
| `PermanentError`           | dead letter, then term, on the first attempt              |
| undecodable bytes          | dead letter, then term; the handler is never called       |

The runtime dead-letters by itself on the last allowed delivery: the broker's max-deliveries
advisory carries no body and arrives late. The broker's own `max_deliver` is one higher than the
consumer's, so a delivery whose worker died on the last attempt still comes back once, and is
dead-lettered instead of vanishing.

`declaration` holds what a service declares (`Consumer`) and what its handler receives
(`Delivery`); `runtime` the loop that runs one (`ConsumerRuntime`); `deadletter` what it writes
when it gives up on a message; `provisioning` every declared consumer as an admin provisions it,
and a service waiting for its own.
"""

from .declaration import Consumer, Decoder, Delivery, Handler
from .provisioning import declared_consumers
from .runtime import ConsumerRuntime

__all__ = ["Consumer", "ConsumerRuntime", "Decoder", "Delivery", "Handler", "declared_consumers"]
