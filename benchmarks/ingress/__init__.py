"""Ingress throughput against two ceilings measured in the same run (issue #10, part 1).

For each durability mode of the broker (`relaxed`: NATS's default lazy fsync; `always`:
`sync_interval: always`, every message fsynced before its ack) this starts a fresh nats-server
with a file store and measures, with the same pre-generated requests, generator and connections:

- **bare**: a Starlette endpoint that reads the body and answers 202, served the way ingress is
  (`benchmarks.bare`, one process like ingress): the HTTP ceiling on this machine;
- **publish**: the same endpoint doing the work ingress cannot avoid: it publishes each body with
  nats-py (its `webhook-id` as `Nats-Msg-Id`) and answers once the PubAck is back: the ceiling
  for an endpoint that stores what it accepts, and the one ingress is held to (ingress/publish);
- **broker**: one nats-py client publishing the same messages (same headers, `Nats-Msg-Id`)
  with many publishes in flight to a stream configured like EVENTS: the broker ceiling;
- **broker, as many in flight as connections**: the same client with no more publishes in
  flight than ingress can have (one per connection: each request waits for its PubAck). With
  `sync_interval: always` the broker's rate depends on that number (it syncs what is pending
  together), so this is the ceiling for ingress at that concurrency;
- **ingress**: the real service (`python -m desk ingress`) verifying each signature and
  answering 202 after the PubAck; then exactly-once: the stream holds N messages, and 1,000
  of the requests sent again answer `duplicate: true` and store nothing.

The machine is shared, so the four are interleaved: the N requests are cut into `rounds`
slices, and each round measures all four on its slice (in a rotating order).
A burst of load from elsewhere then hits all four alike, and the ratios hold.

    python -m benchmarks.ingress [--requests N] [--connections 64] [--json PATH]

`run(...)` returns the dict it writes as JSON; its `headline` holds the figures `make bench`
prints (ingress figures from the relaxed mode, `synced/broker` from the sync-always mode).
The targets: ingress/publish ≥ 0.80 and sync-always ingress/broker ≥ 0.90; ingress/bare is a
figure (what storing costs at all), not a target.
"""

from .report import run

__all__ = ["run"]
