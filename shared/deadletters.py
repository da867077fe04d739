"""Reading and replaying the dead-letter stream (used by the inbox API and `desk dlq`).

A dead letter is what the consumer runtime writes on a permanent failure, undecodable bytes or
exhausted retries: the original payload bytes unchanged, the original headers (minus `Nats-*`)
plus `Desk-Original-Msg-Id` and the `Desk-Dlq-*` facts. Its id is its DLQ stream sequence.

Replay is by reference: a dead letter names the stream and sequence of the message that failed,
and replay fetches that stored original and republishes its bytes and headers to the subject it
was stored on, with the dedup id `replay:<id>`; the letter's own payload and headers are shown,
never republished (any service may write its own `dlq.<service>`, so a letter's text is only
that service's word). A letter is refused (`RefusedReplay`) unless it sits on the subject of
the service it names, names a consumer that service owns on that stream, and the original's
subject is one that consumer takes. Then the dead letter is deleted, so the DLQ holds only what
is still outstanding. A replay interrupted between the two steps is safe to repeat: the broker
drops the second publish (`duplicate=True`) and the delete completes. A replayed message reaches
every consumer whose filter matches the original subject, not only the one that failed.

An original that aged out of its stream cannot be replayed (`RefusedReplay` says so).

Who wrote a letter is the subject it sits on, `dlq.<service>`: the broker lets only that
service publish there. A letter is listed as that service's (`service`); if its own headers
name another, that claim is shown beside it (`claimed_service`), never believed, and such a
letter is refused for replay.

`replay_all` replays every letter outstanding when it starts (the inbox's "Replay all", `desk dlq
replay --all`), leaving the refused ones.

Unknown ids: `get_dead_letter` returns `None`; `replay` raises `UnknownDeadLetter` (a
`LookupError`), also for an id that was replayed already.
"""

from __future__ import annotations

import datetime as dt

import nats.js.errors as js_errors
from nats.js import JetStreamContext
from nats.js.api import RawStreamMsg
from pydantic import BaseModel, ConfigDict

from . import clock, ids, subjects
from . import headers as h
from .bus import BrokerCode, Bus
from .catalog import BY_NAME
from .errors import TransientError

STREAM = subjects.DLQ
PAYLOAD_DISPLAY_LIMIT = 64 * 1024  # bytes of payload kept in `DeadLetter.payload`

_DLQ_PREFIX = "desk-dlq-"  # every header the runtime adds about the failure (compared lowercased)


class UnknownDeadLetter(LookupError):
    """No dead letter with this id: never written, already replayed, or aged out."""

    def __init__(self, id: int) -> None:
        super().__init__(f"no dead letter with id {id}")
        self.id = id


class RefusedReplay(ValueError):
    """A dead letter that cannot be replayed: it does not check out, or its original is gone."""

    def __init__(self, id: int, why: str) -> None:
        super().__init__(f"dead letter {id} cannot be replayed: {why}")
        self.id = id
        self.why = why


class DeadLetter(BaseModel):
    """One dead letter as stored in the DLQ stream, with its payload decoded for display."""

    model_config = ConfigDict(frozen=True)

    id: int
    service: str  # who wrote it: the service whose `dlq.<service>` subject it sits on
    claimed_service: str | None  # the service its headers name, when that is another
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
    """Republish the stored original of dead letter `id`, then remove the letter from the DLQ.

    Raises `UnknownDeadLetter` if there is no such dead letter, `RefusedReplay` if it does not
    check out or its original is gone, and the `Bus.publish` errors if the publish fails (the
    dead letter is then kept).
    """
    raw = await _get(bus.js, id)
    if raw is None:
        raise UnknownDeadLetter(id)
    letter = _parse(raw)
    original = await original_of(bus.js, letter, raw.subject)
    assert original.subject is not None
    stored = {str(k): str(v) for k, v in (original.headers or {}).items()}
    headers = {k: v for k, v in stored.items() if not k.startswith(h.BROKER_PREFIX)}
    if h.MSG_ID in stored:
        headers[h.ORIGINAL_MSG_ID] = stored[h.MSG_ID]
    published = await bus.publish(
        original.subject, original.data or b"", msg_id=ids.replay(id), headers=headers
    )
    try:
        await bus.js.delete_msg(STREAM, id)
    except js_errors.BadRequestError as exc:
        # already gone: a concurrent replay deleted it first, which is fine
        if exc.err_code != BrokerCode.SEQUENCE_NOT_FOUND:
            raise
    return ReplayResult(
        id=id,
        subject=letter.subject,
        stream=published.stream,
        seq=published.seq,
        duplicate=published.duplicate,
    )


async def replay_all(bus: Bus) -> tuple[list[ReplayResult], dict[int, str]]:
    """Replay every dead letter outstanding now, oldest first: the replays, and each refused
    letter's id with why (it stays: refused, or its publish failed). A letter written meanwhile
    (a replay that failed again, say) waits for the next call, so this ends; one replayed
    meanwhile by another is skipped."""
    last = (await bus.js.stream_info(STREAM)).state.last_seq
    replayed: list[ReplayResult] = []
    refused: dict[int, str] = {}
    after = 0
    while after < last:
        letters = [d for d in await list_dead_letters(bus.js, after=after) if d.id <= last]
        if not letters:
            break
        for letter in letters:
            try:
                replayed.append(await replay(bus, letter.id))
            except UnknownDeadLetter:
                continue
            except (RefusedReplay, TransientError) as exc:
                refused[letter.id] = exc.why if isinstance(exc, RefusedReplay) else str(exc)
        after = letters[-1].id
    return replayed, refused


async def original_of(
    js: JetStreamContext, letter: DeadLetter, letter_subject: str | None
) -> RawStreamMsg:
    """The stored message `letter` is about, once the letter checks out against the catalog."""
    spec = BY_NAME.get(letter.service)
    if letter.claimed_service is not None:
        raise RefusedReplay(
            letter.id,
            f"it names service {letter.claimed_service!r} but sits on {letter_subject!r}",
        )
    if spec is None or letter_subject != subjects.dlq(spec.name):
        raise RefusedReplay(
            letter.id, f"it names service {letter.service!r} but sits on {letter_subject!r}"
        )
    owned = [c for c in spec.consumers if c.durable == letter.consumer]
    if not owned or owned[0].stream != letter.stream:
        raise RefusedReplay(
            letter.id, f"{spec.name} owns no consumer {letter.consumer!r} on {letter.stream!r}"
        )
    if not 1 <= letter.stream_seq < 2**63:
        raise RefusedReplay(letter.id, "it does not name the stored message it is about")
    try:
        original = await js.get_msg(letter.stream, seq=letter.stream_seq)
    except js_errors.NotFoundError:
        raise RefusedReplay(
            letter.id,
            f"{letter.stream} no longer holds message {letter.stream_seq} (aged out or removed)",
        ) from None
    subject = original.subject or ""
    if not owned[0].covers(subject) or (letter.subject and letter.subject != subject):
        raise RefusedReplay(
            letter.id,
            f"{letter.stream} message {letter.stream_seq} is on {subject!r}, "
            f"which consumer {letter.consumer!r} does not take",
        )
    return original


async def _get(js: JetStreamContext, seq: int) -> RawStreamMsg | None:
    if not 1 <= seq < 2**63:  # 0 means "no sequence" to the server; sequences fit in 63 bits
        return None
    try:
        return await js.get_msg(STREAM, seq=seq)
    except js_errors.NotFoundError as exc:
        if exc.err_code == BrokerCode.NO_MESSAGE_FOUND:
            return None
        raise  # the DLQ stream itself is missing


async def _next(js: JetStreamContext, seq: int) -> RawStreamMsg | None:
    """The first dead letter at or after `seq`."""
    try:
        return await js.get_msg(STREAM, seq=seq, subject=subjects.ALL_DLQ, next=True)
    except js_errors.NotFoundError as exc:
        if exc.err_code == BrokerCode.NO_MESSAGE_FOUND:
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
    claimed = fact(h.DLQ_SERVICE)
    writer = writer_of(raw.subject)
    return DeadLetter(
        id=raw.seq,
        service=writer,
        claimed_service=claimed if claimed != writer else None,
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


def writer_of(subject: str | None) -> str:
    """The service whose dead-letter subject `subject` is (`dlq.<service>`): the only one the
    broker lets publish there."""
    prefix = subjects.ALL_DLQ.removesuffix(">")
    if subject and subject.startswith(prefix) and len(subject) > len(prefix):
        return subject[len(prefix) :]
    return ""


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0


def _time(text: str, stored: dt.datetime | None) -> dt.datetime:
    """When the runtime wrote the dead letter; the broker's store time if the header is bad."""
    try:
        return clock.parse(text)
    except ValueError:
        return stored or dt.datetime.fromtimestamp(0, dt.UTC)
