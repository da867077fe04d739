"""What the runtime writes when it gives up on a message: a dead letter's headers and error text.

The letter is the original payload unchanged, with the original headers (minus the broker's)
plus `Desk-Original-Msg-Id` and the `Desk-Dlq-*` facts; `shared.deadletters` reads and replays
it.
"""

from __future__ import annotations

import datetime as dt

from nats.aio.msg import Msg

from .. import headers as h
from .. import logging as desk_logging
from ..errors import BusinessReject, PermanentError, TransientError

DEAD_LETTER_REASONS = ("undecodable", "permanent", "retries_exhausted")


def letter_headers(
    msg: Msg, service: str, consumer: str, reason: str, error: str
) -> dict[str, str]:
    """The headers of `msg`'s dead letter, written by `consumer` of `service`."""
    meta = msg.metadata
    original = dict(msg.headers or {})
    hdrs = {k: v for k, v in original.items() if not k.startswith(h.BROKER_PREFIX)}
    if h.MSG_ID in original:
        hdrs[h.ORIGINAL_MSG_ID] = original[h.MSG_ID]
    hdrs.update(
        {
            h.DLQ_SERVICE: service,
            h.DLQ_CONSUMER: consumer,
            h.DLQ_STREAM: meta.stream,
            h.DLQ_STREAM_SEQ: str(meta.sequence.stream),
            h.DLQ_SUBJECT: msg.subject,
            h.DLQ_ATTEMPTS: str(meta.num_delivered),
            h.DLQ_REASON: reason,
            h.DLQ_ERROR: error,
            h.DLQ_TIME: dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
    )
    return hdrs


def describe(exc: BaseException) -> str:
    """A one-line error text for a header: class name and message, no newlines, bounded."""
    text = str(exc) or exc.__class__.__name__
    if not isinstance(exc, (TransientError, PermanentError, BusinessReject)):
        text = f"{exc.__class__.__name__}: {text}"
    return desk_logging.redact(" ".join(text.split()))[:1000]
