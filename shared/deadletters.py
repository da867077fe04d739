"""Reading and replaying the dead-letter stream (used by the inbox API and `desk dlq`).

A dead letter is what the consumer runtime writes on a permanent failure, undecodable bytes or
exhausted retries: the original payload bytes unchanged, the original headers (minus `Nats-*`)
plus `Desk-Original-Msg-Id` and the `Desk-Dlq-*` facts. Its id is its DLQ stream sequence.

Replay publishes the original bytes and headers (without `Desk-Dlq-*`) to the original subject
with the dedup id `replay:<id>`, then deletes the dead letter, so the DLQ holds only what is still
outstanding. A replay interrupted between the two steps is safe to repeat: the broker drops the
second publish (`duplicate=True`) and the delete completes. A replayed message reaches every
consumer whose filter matches the original subject, not only the one that failed.

Unknown ids: `get_dead_letter` returns `None`; `replay` raises `UnknownDeadLetter` (a
`LookupError`), also for an id that was replayed already.
"""

from __future__ import annotations

import datetime as dt

import nats.js.errors as js_errors
from nats.js import JetStreamContext
from nats.js.api import RawStreamMsg
from pydantic import BaseModel, ConfigDict

from . import headers as h
from . import ids, subjects
from .bus import Bus

STREAM = subjects.DLQ
PAYLOAD_DISPLAY_LIMIT = 64 * 1024  # bytes of payload kept in `DeadLetter.payload`

_DLQ_PREFIX = "desk-dlq-"  # every header the runtime adds about the failure (compared lowercased)
_NO_MESSAGE = 10037  # "no message found": an empty stream, a deleted or a future sequence
_SEQ_NOT_FOUND = 10043  # delete_msg of a sequence that is already gone


class UnknownDeadLetter(LookupError):
    """No dead letter with this id: never written, already replayed, or aged out."""

    def __init__(self, id: int) -> None:
        super().__init__(f"no dead letter with id {id}")
        self.id = id


class DeadLetter(BaseModel):
    """One dead letter as stored in the DLQ stream, with its payload decoded for display."""

    model_config = ConfigDict(frozen=True)

    id: int
    service: str
    consumer: str
    stream: str
    stream_seq: int
    subject: str
    attempts: int
    reason: str
    error: str
    time: dt.datetime
    original_msg_id: str | None
    headers: dict[str, str]
    payload: str
    payload_size: int


class ReplayResult(BaseModel):
    """Where a replayed dead letter went; `duplicate` means it had been replayed before."""

    model_config = ConfigDict(frozen=True)

    id: int
    subject: str
    stream: str
    seq: int
    duplicate: bool


async def list_dead_letters(
    js: JetStreamContext, *, limit: int = 100, after: int | None = None
) -> list[DeadLetter]:
    """Up to `limit` dead letters with an id greater than `after`, oldest first.

    Page with `after=<last id of the previous page>`. Deleted (replayed) ids are skipped by the
    broker's "next message from sequence" lookup, so gaps cost nothing.
    """
    found: list[DeadLetter] = []
    seq = max(after or 0, 0) + 1
    while len(found) < limit:
        raw = await _next(js, seq)
        if raw is None:
            break
        found.append(_parse(raw))
        seq = found[-1].id + 1
    return found


async def get_dead_letter(js: JetStreamContext, id: int) -> DeadLetter | None:
    raw = await _get(js, id)
    return None if raw is None else _parse(raw)


async def count(js: JetStreamContext) -> int:
    """How many dead letters are outstanding (written and not replayed)."""
    info = await js.stream_info(STREAM)
    return info.state.messages


async def replay(bus: Bus, id: int) -> ReplayResult:
    """Republish dead letter `id` to its original subject, then remove it from the DLQ.

    Raises `UnknownDeadLetter` if there is no such dead letter, `ValueError` if it does not name
    the subject it came from, and the `Bus.publish` errors if the publish fails (the dead letter
    is then kept).
    """
    raw = await _get(bus.js, id)
    if raw is None:
        raise UnknownDeadLetter(id)
    letter = _parse(raw)
    if not letter.subject:
        raise ValueError(f"dead letter {id} does not record its original subject")
    published = await bus.publish(
        letter.subject, raw.data or b"", msg_id=ids.replay(id), headers=letter.headers
    )
    try:
        await bus.js.delete_msg(STREAM, id)
    except js_errors.BadRequestError as exc:
        if exc.err_code != _SEQ_NOT_FOUND:  # a concurrent replay deleted it first: fine
            raise
    return ReplayResult(
        id=id,
        subject=letter.subject,
        stream=published.stream,
        seq=published.seq,
        duplicate=published.duplicate,
    )


async def _get(js: JetStreamContext, seq: int) -> RawStreamMsg | None:
    if not 1 <= seq < 2**63:  # 0 means "no sequence" to the server; sequences fit in 63 bits
        return None
    try:
        return await js.get_msg(STREAM, seq=seq)
    except js_errors.NotFoundError as exc:
        if exc.err_code == _NO_MESSAGE:
            return None
        raise  # the DLQ stream itself is missing


async def _next(js: JetStreamContext, seq: int) -> RawStreamMsg | None:
    """The first dead letter at or after `seq`."""
    try:
        return await js.get_msg(STREAM, seq=seq, subject=subjects.ALL_DLQ, next=True)
    except js_errors.NotFoundError as exc:
        if exc.err_code == _NO_MESSAGE:
            return None
        raise


def _parse(raw: RawStreamMsg) -> DeadLetter:
    stored = {str(k): str(v) for k, v in (raw.headers or {}).items()}
    facts = {k.lower(): v for k, v in stored.items()}
    original = {
        k: v
        for k, v in stored.items()
        if not k.lower().startswith(_DLQ_PREFIX) and not k.startswith(h.BROKER_PREFIX)
    }
    data = raw.data or b""

    def fact(name: str) -> str:
        return facts.get(name.lower(), "")

    assert raw.seq is not None
    return DeadLetter(
        id=raw.seq,
        service=fact(h.DLQ_SERVICE),
        consumer=fact(h.DLQ_CONSUMER),
        stream=fact(h.DLQ_STREAM),
        stream_seq=_int(fact(h.DLQ_STREAM_SEQ)),
        subject=fact(h.DLQ_SUBJECT),
        attempts=_int(fact(h.DLQ_ATTEMPTS)),
        reason=fact(h.DLQ_REASON),
        error=fact(h.DLQ_ERROR),
        time=_time(fact(h.DLQ_TIME), raw.time),
        original_msg_id=original.get(h.ORIGINAL_MSG_ID),
        headers=original,
        payload=data[:PAYLOAD_DISPLAY_LIMIT].decode("utf-8", errors="replace"),
        payload_size=len(data),
    )


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0


def _time(text: str, stored: dt.datetime | None) -> dt.datetime:
    """When the runtime wrote the dead letter; the broker's store time if the header is bad."""
    try:
        value = dt.datetime.fromisoformat(text)
    except ValueError:
        return stored or dt.datetime.fromtimestamp(0, dt.UTC)
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
