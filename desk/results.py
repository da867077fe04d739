"""`desk results tail`: print result events (CloudEvents JSON) as they arrive.

A subscriber another system can copy: a JetStream consumer on `results.>` (durable with
`--durable NAME`, so it resumes where it stopped; ephemeral otherwise), acking each event after
handling it, and treating the event `id` as its idempotency key.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from typing import Any

import nats.errors as nats_errors
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

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
    # Ctrl-C (or SIGTERM) sets `stop` rather than cancelling the task: a cancel that lands as
    # a fetch's 1 s timeout expires is lost inside nats-py's next_msg (asyncio.wait_for on
    # Python 3.11), and the tail went on as if nothing had been pressed.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
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
        while (count == 0 or seen < count) and not stop.is_set():
            try:
                msgs = await _fetch(sub, stop)
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
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
        # a drain would wait on the pull subscription (drain_timeout, 30 s) and make Ctrl-C
        # look ignored; the acks are flushed, and nothing else is owed
        await bus.close(drain=False)
    return 0


async def _fetch(sub: JetStreamContext.PullSubscription, stop: asyncio.Event) -> list[Msg]:
    """Up to 10 events within a second, or none once `stop` is set (what a fetch cut short
    had received is not acked: a durable consumer delivers it again)."""
    fetching = asyncio.ensure_future(sub.fetch(10, timeout=1.0))
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({fetching, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
    if not fetching.done():
        fetching.cancel()
        await asyncio.wait({fetching})
        if not fetching.cancelled():
            fetching.exception()  # retrieved: a fetch that ended otherwise is not an error now
        return []
    return fetching.result()


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
