"""The pipeline, ingress's publish path, against a real nats-server.

What a user relies on: an event is stored once under its id with the headers `Bus.publish`
would store; a repeat is reported as a duplicate; no stream means `TransientError` after the
timeout; a lost PubAck is recovered by the fallback without a second copy; concurrent publishes
each get their own PubAck; and the ingress NATS user's permissions are enough (and no more).

Which path stored an event shows in `desk_publishes_total`: the pipeline counts under its own
service label, `Bus.publish` (the fallback) under the bus's. The tests give the two different
labels (in ingress they are the same).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import string
import time
from collections.abc import AsyncIterator

import nats.errors as nats_errors
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from prometheus_client import REGISTRY

from desk.credentials import nats_passwords
from desk.natsserver import NatsServer
from services.ingress.replays import Replays
from shared import headers as h
from shared import subjects
from shared.bus import Bus, NatsAuth, Published
from shared.bus.pipeline import Pipeline, _pub_ack_json, header_block
from shared.errors import TransientError
from shared.ledger import Ledger
from shared.permissions import ADMIN, authorization_block
from shared.streams import Topology, provision
from tests.helpers import eventually, messages

REF = "REF"  # what `Bus.publish` stores, to compare with (dedup ids are per stream)
PIPELINE = "pipeline-test"  # the pipeline's label; the `bus` fixture's is "test"
SUBJECT = subjects.event("helpdesk", "ticket.created")


def published(service: str, result: str) -> float:
    value = REGISTRY.get_sample_value(
        "desk_publishes_total", {"service": service, "result": result}
    )
    return value or 0.0


async def raw_headers(bus: Bus, stream: str, seq: int) -> bytes:
    """The header block exactly as the server stored it."""
    msg = await bus.js.get_msg(stream, seq)
    assert msg.hdrs is not None
    return base64.b64decode(msg.hdrs)


async def count(bus: Bus, stream: str) -> int:
    return (await bus.js.stream_info(stream)).state.messages


@pytest.fixture
async def pipeline(bus: Bus) -> AsyncIterator[Pipeline]:
    await bus.js.add_stream(name=REF, subjects=["ref.>"])
    async with Pipeline(5.0, service=PIPELINE) as rec:
        await rec.attach(bus)
        yield rec


async def test_an_event_is_stored_once_with_its_id_and_the_headers_bus_publish_stores(
    bus: Bus, pipeline: Pipeline
) -> None:
    headers = {
        "content-type": "application/json",
        "webhook-id": "evt_1",
        "X-Note": "  padded, \r\n folded  ",  # stripped, CR/LF made spaces, as nats-py does
        h.MSG_ID: "not-this-one",  # the id passed in wins, as with Bus.publish
        h.SOURCE: "helpdesk",
        h.EVENT_TYPE: "ticket.created",
        h.CORRELATION_ID: "helpdesk:evt_1",
    }
    body = b'{"id": "evt_1"}'
    stored_before, fallback_before = published(PIPELINE, "stored"), published("test", "stored")

    ack = await pipeline.record(SUBJECT, body, msg_id="helpdesk:evt_1", headers=headers)
    reference = await bus.publish("ref.helpdesk", body, msg_id="helpdesk:evt_1", headers=headers)

    assert ack == Published(stream=subjects.EVENTS, seq=1, duplicate=False)
    stored = await messages(bus.js, subjects.EVENTS)
    assert [(m.seq, m.subject, m.data) for m in stored] == [(1, SUBJECT, body)]
    assert stored[0].headers is not None
    assert stored[0].headers[h.MSG_ID] == "helpdesk:evt_1"
    assert await raw_headers(bus, subjects.EVENTS, 1) == await raw_headers(bus, REF, reference.seq)
    assert published(PIPELINE, "stored") == stored_before + 1  # its own PubAck, no fallback
    assert published("test", "stored") == fallback_before + 1  # only the reference publish

    duplicate_before = published(PIPELINE, "duplicate")
    again = await pipeline.record(
        SUBJECT, b'{"id": "evt_1", "retried": true}', msg_id="helpdesk:evt_1", headers=headers
    )
    assert again == Published(stream=subjects.EVENTS, seq=1, duplicate=True)
    assert [(m.seq, m.data) for m in await messages(bus.js, subjects.EVENTS)] == [(1, body)]
    assert published(PIPELINE, "duplicate") == duplicate_before + 1


TOKEN = "!#$%&'*+-.^_`|~" + string.ascii_letters + string.digits  # what a header name may hold
tokens = st.text(TOKEN, min_size=1, max_size=20)
anything = st.text(st.characters(codec="utf-8"), max_size=12)  # mostly names nats-py refuses
names = st.one_of(
    tokens,
    tokens.map(lambda name: f" {name}\t"),  # nats-py strips names
    st.sampled_from(["", " "]),  # and skips empty ones
    anything,
    st.builds("{}: {}".format, tokens, tokens),  # would read as a name and part of a value
).filter(lambda name: not name.strip().lower().startswith("nats-"))  # the broker acts on those
values = st.one_of(
    st.text(st.one_of(st.characters(codec="utf-8"), st.sampled_from(" \t\r\n")), max_size=40),
    st.builds("{}\r\n{}: {}".format, anything, tokens, anything),  # would read as two lines
)
examples = itertools.count()


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(headers=st.dictionaries(names, values, max_size=6), id_suffix=values)
@example(headers={"X-Forwarded": "a\r\nInjected: yes"}, id_suffix="")
@example(headers={"A: b": "c"}, id_suffix="")
async def test_header_block_is_byte_for_byte_what_nats_py_sends(
    bus: Bus, pipeline: Pipeline, headers: dict[str, str], id_suffix: str
) -> None:
    n = next(examples)
    msg_id = f"prop-{n}-{id_suffix}"  # unique even once stripped
    try:
        reference = await bus.publish(f"ref.prop.{n}", b"{}", msg_id=msg_id, headers=headers)
    except nats_errors.BadHeaderError as refused:
        event("refused by nats-py")
        with pytest.raises(nats_errors.BadHeaderError) as raised:
            header_block(headers, msg_id)
        assert str(raised.value) == str(refused)
        before = await count(bus, subjects.EVENTS)
        with pytest.raises(nats_errors.BadHeaderError):
            await pipeline.record(f"events.prop.{n}", b"{}", msg_id=msg_id, headers=headers)
        assert await count(bus, subjects.EVENTS) == before
        return
    event("stored")
    sent = await raw_headers(bus, REF, reference.seq)
    assert header_block(headers, msg_id) == sent
    ack = await pipeline.record(f"events.prop.{n}", b"{}", msg_id=msg_id, headers=headers)
    assert not ack.duplicate
    assert await raw_headers(bus, subjects.EVENTS, ack.seq) == sent


async def test_with_no_stream_on_the_subject_record_raises_transient_after_the_timeout(
    bus: Bus,
) -> None:
    def failed() -> float:  # in ingress both are "ingress": one failure, counted once
        return published(PIPELINE, "failed") + published("test", "failed")

    failed_before = failed()
    async with Pipeline(1.0, service=PIPELINE) as rec:
        await rec.attach(bus)
        started = time.monotonic()
        with pytest.raises(TransientError):
            await rec.record("nowhere.event", b"{}", msg_id="lost-1", headers={"X": "1"})
        took = time.monotonic() - started
    assert 0.95 <= took < 1.8

    started = time.monotonic()  # as Bus.publish does
    with pytest.raises(TransientError):
        await bus.publish("nowhere.event", b"{}", msg_id="lost-1", timeout=1.0)
    assert 0.95 <= time.monotonic() - started < 1.8

    assert sum(s.state.messages for s in await bus.js.streams_info()) == 0  # nowhere
    assert failed() == failed_before + 2  # one for the pipeline, one for Bus.publish


async def test_a_stream_created_after_the_first_attempt_stores_the_event_once(bus: Bus) -> None:
    async with Pipeline(5.0, service=PIPELINE) as rec:
        await rec.attach(bus)
        sent = bus.nc.stats["out_msgs"]
        record = asyncio.create_task(
            rec.record("late.event", b"{}", msg_id="late-1", headers={"X": "1"})
        )
        # The pipeline's attempt and the fallback's first are on the wire (and so reach the
        # server before the stream is added, on this same connection): both found no stream.
        await eventually(lambda: bus.nc.stats["out_msgs"] >= sent + 2, message="two attempts")
        await bus.js.add_stream(name="LATE", subjects=["late.>"])
        ack = await asyncio.wait_for(record, 5)
    assert ack == Published(stream="LATE", seq=1, duplicate=False)
    stored = await messages(bus.js, "LATE")
    assert [(m.seq, (m.headers or {}).get(h.MSG_ID)) for m in stored] == [(1, "late-1")]


class SlowToRead(Pipeline):
    """Reads every PubAck `delay` seconds late (a loaded machine): each is overdue."""

    delay = 0.5

    def _read(self, subject: bytes, data: bytes) -> None:
        asyncio.get_running_loop().call_later(self.delay, super()._read, subject, data)


async def test_a_pub_ack_read_late_is_not_taken_for_a_duplicate(bus: Bus) -> None:
    """The first attempt stored the event, its PubAck came after half the timeout, and the
    second attempt (the same id) was answered duplicate: the event is new to the caller (a
    webhook answered `duplicate: true` on its first delivery was seen on a slow CI machine).
    An event that was stored before is still a duplicate."""
    await bus.js.add_stream(name="SLOW", subjects=["slow.>"])
    async with SlowToRead(0.6, service=PIPELINE) as rec:  # half: 0.3 s < the 0.5 s delay
        await rec.attach(bus)
        first = await rec.record("slow.event", b"{}", msg_id="slow-1", headers={})
        again = await rec.record("slow.event", b"{}", msg_id="slow-1", headers={})
    assert first == Published(stream="SLOW", seq=1, duplicate=False)
    assert again == Published(stream="SLOW", seq=1, duplicate=True)
    assert await count(bus, "SLOW") == 1


async def test_a_pub_ack_lost_to_a_broker_restart_is_recovered_without_a_second_copy(
    bus: Bus, nats_server: NatsServer
) -> None:
    timeout = 5.0
    async with Pipeline(timeout, service=PIPELINE) as rec:
        await rec.attach(bus)
        await asyncio.to_thread(nats_server.stop)
        await eventually(lambda: not bus.connected, message="the client to notice")
        sent = bus.nc.stats["out_msgs"]
        record = asyncio.create_task(rec.record(SUBJECT, b"{}", msg_id="restart-1", headers={}))
        # No PubAck in half the timeout: the fallback publishes again (same id), both buffered.
        await eventually(
            lambda: bus.nc.stats["out_msgs"] >= sent + 2, timeout=timeout, message="fallback"
        )
        assert not record.done()
        await asyncio.to_thread(nats_server.start)  # same port, same store
        ack = await asyncio.wait_for(record, timeout)

        stored = await messages(bus.js, subjects.EVENTS)
        assert [(m.seq, (m.headers or {}).get(h.MSG_ID)) for m in stored] == [(1, "restart-1")]
        assert (ack.stream, ack.seq) == (subjects.EVENTS, 1)

        # Back to its own reply subscription (restored on reconnect), no fallback.
        before = published(PIPELINE, "stored")
        after = await rec.record(SUBJECT, b"{}", msg_id="restart-2", headers={})
        assert after == Published(stream=subjects.EVENTS, seq=2, duplicate=False)
        assert published(PIPELINE, "stored") == before + 1


async def test_concurrent_records_each_get_their_own_pub_ack(bus: Bus, pipeline: Pipeline) -> None:
    n = 500
    before, fallback_before = published(PIPELINE, "stored"), published("test", "stored")
    acks = await asyncio.wait_for(
        asyncio.gather(
            *(
                pipeline.record(
                    subjects.event("helpdesk", f"type{i % 7}"),
                    b'{"n": %d}' % i,
                    msg_id=f"burst-{i}",
                    headers={h.EVENT_ID: str(i)},
                )
                for i in range(n)
            )
        ),
        20,
    )
    assert not any(ack.duplicate for ack in acks)
    assert len({ack.seq for ack in acks}) == n
    stored = {m.seq: m for m in await messages(bus.js, subjects.EVENTS)}
    assert len(stored) == n
    for i, ack in enumerate(acks):  # each PubAck names the message its own publish stored
        msg = stored[ack.seq]
        assert msg.data == b'{"n": %d}' % i
        assert msg.headers is not None and msg.headers[h.MSG_ID] == f"burst-{i}"
    assert published(PIPELINE, "stored") == before + n  # every one by its own PubAck
    assert published("test", "stored") == fallback_before


PASSWORDS = nats_passwords()


@pytest.fixture
def secured(nats_server: NatsServer) -> NatsServer:
    """The `nats_server` fixture's, restarted with the per-service users (`desk nats-config`)."""
    nats_server.stop()
    nats_server.authorization = authorization_block(PASSWORDS)
    nats_server.start()
    return nats_server


async def test_the_ingress_user_can_record_events_and_only_events(secured: NatsServer) -> None:
    admin = await Bus.connect(
        secured.url, service=ADMIN, auth=NatsAuth(user=ADMIN, password=PASSWORDS[ADMIN])
    )
    ingress = await Bus.connect(
        secured.url, service="ingress", auth=NatsAuth(user="ingress", password=PASSWORDS["ingress"])
    )
    try:
        await provision(admin.js, Topology())
        async with Pipeline(1.0, service=PIPELINE) as rec:
            await rec.attach(ingress)
            before = published(PIPELINE, "stored")
            ack = await rec.record(SUBJECT, b"{}", msg_id="perm-1", headers={"X": "1"})
            assert ack == Published(stream=subjects.EVENTS, seq=1, duplicate=False)
            # its own PubAck came back: the ingress user may subscribe under its own inbox
            # prefix only, so the pipeline's replies are addressed there
            assert published(PIPELINE, "stored") == before + 1

            with pytest.raises(TransientError):  # not ingress's to publish
                await rec.record(
                    subjects.result("reply.sent"), b"{}", msg_id="forged-1", headers={}
                )
        assert await count(admin, subjects.RESULTS) == 0
        assert await count(admin, subjects.EVENTS) == 1

        # and remember the bodies of sources without a timestamp, to refuse their replays
        replays = Replays()
        replays.attach(await Ledger.open(ingress.js, "ingress"))
        assert not await replays.seen("github", "sha256-00")
        await replays.remember("github", "sha256-00", 1)
        assert await replays.seen("github", "sha256-00")
    finally:
        await ingress.close()
        await admin.close()


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not json",
        b"[1, 2]",
        b'{"stream": "EVENTS"}',  # no seq
        b'{"stream": "EVENTS", "seq": "x"}',
        b'{"stream": "EVENTS", "seq": null}',
        b'{"error": {"code": 503, "description": "unavailable"}}',
    ],
)
def test_a_reply_that_is_no_pub_ack_reads_as_none(body: bytes) -> None:
    """Replies are read inside the client's read loop: one that is not a PubAck (from a
    misbehaving server or anything else on the reply subject) is no PubAck, and no exception
    that would drop the connection; the publish then goes the fallback's way."""
    assert _pub_ack_json(body) is None


@given(st.binary(max_size=64))
def test_reading_any_reply_body_never_raises(body: bytes) -> None:
    _pub_ack_json(body)


def test_a_pub_ack_reads_as_stored_or_duplicate() -> None:
    assert _pub_ack_json(b'{"stream":"EVENTS","seq":7}') == Published("EVENTS", 7, False)
    assert _pub_ack_json(b'{"stream":"EVENTS","seq":7,"duplicate":true}') == Published(
        "EVENTS", 7, True
    )
