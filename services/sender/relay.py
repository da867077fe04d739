"""The sender's outbox: result rows → `results.<type>` (CloudEvents), published by the relay
(`shared.outbox`) at start-up, whenever a row is committed, and every interval, so a crash
between the commit and the publish republishes; the msg id (= the event id) makes that a no-op
for subscribers. A result carries the correlation id of the decision or event it answers.
"""

from __future__ import annotations

import functools

from sqlalchemy.engine import Engine

from shared import subjects
from shared.bus import Bus
from shared.envelope import Envelope
from shared.outbox import Message, Outbox, Relay
from shared.results import SOURCE_SENDER

from . import store


def results(engine: Engine) -> Outbox:
    return Outbox(
        "result",
        pending=functools.partial(_pending, engine),
        mark=functools.partial(store.mark_published, engine),
    )


def relay(bus: Bus, engine: Engine) -> Relay:
    return Relay(bus, results(engine), name="result relay")


def _pending(engine: Engine) -> list[Message]:
    return [
        Message(
            key=row.id,
            subject=subjects.result(row.type),
            envelope=Envelope(
                id=row.id,
                source=SOURCE_SENDER,
                type=row.type,
                subject=row.subject,
                time=row.created_at,
                data=row.data,
                correlationid=row.correlation_id,
            ),
            traceparent=row.traceparent,
        )
        for row in store.pending_results(engine)
    ]
