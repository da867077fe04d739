"""`desk trace`: one event's path through the system, from the broker's own records.

desk trace EVENT_ID | ITEM_ID | TICKET | TRACE_ID

Every message the system stores carries the trace its webhook started (`shared.trace`). This
reads every stream, finds the traces the argument names (a webhook's event id or dedup id, an
inbox item id, a ticket or thread, or a trace id itself), and prints each of their messages in
the order they were stored: the stream and subject, the dedup id, and what each consumer of it
has done with it (done, in flight, waiting) with each attempt's end as the broker recorded it
(`subjects.DELIVERIES`: ack, nak, term, or none: the delivery's ack wait ran out); a dead
letter with its reason and attempts.

Exit status: 0 found, 1 nothing carries that id, 2 no stack (or NATS unreachable).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import nats.errors as nats_errors
import nats.js.errors as js_errors
from nats.js.api import RawStreamMsg

from shared import catalog, subjects, trace
from shared import headers as h
from shared.bus import Bus, NatsAuth, without_credentials
from shared.errors import TransientError
from shared.history import stored, stored_since

STREAMS = (subjects.EVENTS, subjects.WORK, subjects.INBOX, subjects.RESULTS, subjects.DLQ)

# How the broker names a delivery's end in its records (subjects.DELIVERY_RECORDS).
ENDS = {
    "io.nats.jetstream.metric.v1.consumer_ack": "ack",
    "io.nats.jetstream.advisory.v1.nak": "nak",
    "io.nats.jetstream.advisory.v1.terminated": "term",
}
# (stream, consumer, stream sequence) -> {delivery number: how it ended}
Attempts = dict[tuple[str, str, int], dict[int, str]]


@dataclass
class Hop:
    stream: str
    msg: RawStreamMsg
    trace_id: str
    body: dict[str, Any] = field(default_factory=dict)

    @property
    def headers(self) -> dict[str, str]:
        return dict(self.msg.headers or {})


def add_arguments(subparsers: Any) -> None:
    found = subparsers.add_parser("trace", help="one event's path, from the broker's records")
    found.add_argument("id", help="an event id, an inbox item id, a ticket, or a trace id")


def main(args: argparse.Namespace, nats_url: str, auth: NatsAuth) -> int:
    try:
        traces, hops, consumed, attempts = asyncio.run(_read(nats_url, auth, args.id))
    except _Unreachable as exc:
        print(f"desk trace: {exc}", file=sys.stderr)
        return 2
    if not traces:
        print(f"desk trace: no stored message carries {args.id!r}", file=sys.stderr)
        return 1
    print(render(traces, hops, consumed, attempts))
    return 0


class _Unreachable(Exception):
    pass


async def _read(
    nats_url: str, auth: NatsAuth, wanted: str
) -> tuple[list[str], list[Hop], dict[str, Any], Attempts]:
    """The traces `wanted` names, every stored hop, each consumer's progress, and the
    attempts recorded since the first of those traces' messages."""
    try:
        bus = await Bus.connect(nats_url, service="trace", auth=auth, reconnect=False)
    except TransientError as exc:
        raise _Unreachable(f"{exc} ({without_credentials(nats_url)})") from exc
    try:
        hops: list[Hop] = []
        for stream in STREAMS:
            for msg in await stored(bus, stream):
                found = trace.of(msg.headers)
                if found is not None:
                    hops.append(Hop(stream, msg, found.trace_id, _body(msg.data)))
        consumed = {}
        for stream, durable in catalog.DURABLES:
            consumed[durable] = (stream, await bus.js.consumer_info(stream, durable))
        traces = named_by(wanted, hops)
        times = [hop.msg.time for hop in hops if hop.trace_id in traces and hop.msg.time]
        return traces, hops, consumed, (await _attempts(bus, min(times)) if times else {})
    except (js_errors.APIError, nats_errors.Error, TimeoutError) as exc:
        raise _Unreachable(f"NATS refused: {exc.__class__.__name__}: {exc}") from exc
    finally:
        await bus.close()


async def _attempts(bus: Bus, since: dt.datetime) -> Attempts:
    """How each delivery since `since` ended, from the broker's records (none if it keeps
    none: a broker provisioned before they were, or restarted since)."""
    try:
        records = await stored_since(bus, subjects.DELIVERIES, since)
    except js_errors.NotFoundError:
        return {}
    attempts: Attempts = {}
    for record in records:
        body = _body(record.data)
        end = ENDS.get(str(body.get("type")))
        stream, consumer = body.get("stream"), body.get("consumer")
        seq, delivery = body.get("stream_seq"), body.get("deliveries")
        if end and isinstance(stream, str) and isinstance(consumer, str):
            if isinstance(seq, int) and isinstance(delivery, int) and delivery > 0:
                attempts.setdefault((stream, consumer, seq), {})[delivery] = end
    return attempts


def attempts_of(ends: dict[int, str]) -> str:
    """`attempt 1 nak, attempt 2 ack`: each delivery up to the last recorded one; a delivery
    with no record ended without an answer (its ack wait ran out: the process died, or hung)."""
    last = max(ends)
    return ", ".join(f"attempt {n} {ends.get(n, 'no answer')}" for n in range(1, last + 1))


def _body(data: bytes | None) -> dict[str, Any]:
    try:
        value = json.loads(data or b"")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _names(hop: Hop) -> set[str]:
    """Every id a user may know this message by."""
    hdrs = hop.headers
    names = {hdrs.get(h.MSG_ID, ""), hdrs.get(h.EVENT_ID, ""), hdrs.get(h.ORIGINAL_MSG_ID, "")}
    names |= {n.split(":", 1)[1] for n in list(names) if ":" in n}  # helpdesk:evt_1 → evt_1
    for source in (hop.body, hop.body.get("data") if isinstance(hop.body, dict) else None):
        if isinstance(source, dict):
            for key in ("id", "subject", "item_id", "thread", "ticket_id", "ticket"):
                value = source.get(key)
                if isinstance(value, str):
                    names.add(value)
    names.discard("")
    return names


def named_by(wanted: str, hops: Iterable[Hop]) -> list[str]:
    """The trace ids `wanted` names, in the order their first message was stored."""
    found: dict[str, None] = {}
    for hop in hops:
        if wanted == hop.trace_id or wanted in _names(hop):
            found.setdefault(hop.trace_id)
    return list(found)


def _consumption(hop: Hop, consumed: dict[str, Any], attempts: Attempts) -> str:
    seq = hop.msg.seq or 0
    said = []
    for durable, (stream, info) in consumed.items():
        if stream != hop.stream:
            continue
        config = info.config
        filters = list(config.filter_subjects or []) or [config.filter_subject or ">"]
        if not any(catalog.matches(f, hop.msg.subject or "") for f in filters):
            continue
        if info.ack_floor.stream_seq >= seq:
            state = "done"
        elif info.delivered.stream_seq >= seq:
            state = "in flight"
        else:
            state = "waiting"
        ends = attempts.get((stream, durable, seq))
        said.append(f"{durable}: {state}" + (f" ({attempts_of(ends)})" if ends else ""))
    return ", ".join(said)


def render(traces: list[str], hops: list[Hop], consumed: dict[str, Any], attempts: Attempts) -> str:
    lines: list[str] = []
    for trace_id in traces:
        mine = sorted(
            (hop for hop in hops if hop.trace_id == trace_id),
            key=lambda hop: (hop.msg.time.timestamp() if hop.msg.time else 0, hop.msg.seq or 0),
        )
        # the event the trace's messages descend from: one, unless something broke the chain
        correlations = list(dict.fromkeys(hop.headers.get(h.CORRELATION_ID, "-") for hop in mine))
        said = (
            f"correlation id {correlations[0]}"
            if len(correlations) == 1
            else f"{len(correlations)} correlation ids"
        )
        lines.append(f"trace {trace_id}: {len(mine)} messages, {said}")
        for hop in mine:
            hdrs = hop.headers
            when = hop.msg.time.strftime("%H:%M:%S.%f")[:-3] if hop.msg.time else "?"
            head = f"  {when}  {hop.stream:<7} {hop.msg.subject}  {hdrs.get(h.MSG_ID, '')}"
            if len(correlations) > 1:
                head += f"  (correlation {hdrs.get(h.CORRELATION_ID, '-')})"
            if hop.stream == subjects.DLQ:
                lines.append(
                    f"{head}\n      dead letter #{hop.msg.seq}: {hdrs.get(h.DLQ_REASON)} after "
                    f"{hdrs.get(h.DLQ_ATTEMPTS)} attempt(s) at {hdrs.get(h.DLQ_CONSUMER)}: "
                    f"{hdrs.get(h.DLQ_ERROR, '')[:160]}"
                )
                continue
            taken = _consumption(hop, consumed, attempts)
            lines.append(f"{head}\n      {taken or 'no consumer of ours'}")
    return "\n".join(lines)
