"""`desk results tail`: print result events (CloudEvents JSON) as they arrive.

A subscriber another system can copy: a JetStream consumer on `results.>` (durable with
`--durable NAME`, so it resumes where it stopped; ephemeral otherwise), acking each event after
handling it, and treating the event `id` as its idempotency key.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from typing import Any

import nats.errors as nats_errors
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.client import JetStreamContext

from shared import subjects
from shared.bus import Bus, NatsAuth, without_credentials
from shared.errors import TransientError


def add_arguments(subparsers: Any) -> None:
    results = subparsers.add_parser("results", help="result events other systems receive")
    sub = results.add_subparsers(dest="results_command", required=True)
    tail = sub.add_parser("tail", help="print result events as they arrive")
    tail.add_argument("--all", action="store_true", help="start from the first stored event")
    tail.add_argument("--durable", help="a durable consumer name: resume where it stopped")
    tail.add_argument("--count", type=int, default=0, help="exit after N events (0: never)")
    tail.add_argument("--timeout", type=float, default=0, help="exit after N idle seconds")


async def tail(
    nats_url: str,
    *,
    auth: NatsAuth,
    from_start: bool,
    durable: str | None,
    count: int,
    idle: float,
) -> int:
    try:
        bus = await Bus.connect(nats_url, service="results-tail", auth=auth, reconnect=False)
    except TransientError as exc:
        print(f"desk results tail: {exc} ({without_credentials(nats_url)})", file=sys.stderr)
        return 1
    seen = 0
    sub: JetStreamContext.PullSubscription | None = None
    try:
        config = ConsumerConfig(
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL if from_start or durable else DeliverPolicy.NEW,
            inactive_threshold=None if durable else 60.0,
        )
        sub = await bus.js.pull_subscribe(
            subjects.ALL_RESULTS, durable=durable, stream=subjects.RESULTS, config=config
        )
        waited = 0.0
        while count == 0 or seen < count:
            try:
                msgs = await sub.fetch(10, timeout=1.0)
            except (TimeoutError, nats_errors.TimeoutError):
                waited += 1.0
                if idle and waited >= idle:
                    break
                continue
            waited = 0.0
            for msg in msgs:
                try:
                    event = json.loads(msg.data)
                except ValueError:
                    event = {"undecodable": msg.data[:200].decode("utf-8", "replace")}
                print(json.dumps(event, ensure_ascii=False), flush=True)
                await msg.ack()
                seen += 1
                if count and seen >= count:
                    break
    finally:
        # Ctrl-C lands here too (as a cancel): an open pull subscription would make closing
        # drain it, which waits out drain_timeout (30 s) and makes Ctrl-C look ignored.
        if sub is not None:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
        await bus.close()
    return 0


def main(args: argparse.Namespace, nats_url: str, auth: NatsAuth) -> int:
    try:
        return asyncio.run(
            tail(
                nats_url,
                auth=auth,
                from_start=args.all,
                durable=args.durable,
                count=args.count,
                idle=args.timeout,
            )
        )
    except KeyboardInterrupt:
        return 0
