"""Dead letters against a real nats-server: written by the consumer runtime, then listed,
shown, paged, replayed to their original subject and removed; and the `desk dlq` commands."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import pytest

from desk import dlq
from desk.process import free_port
from shared import deadletters, ids, subjects
from shared.bus import Bus, NatsAuth
from shared.consumer import Consumer, ConsumerRuntime, Delivery
from shared.deadletters import UnknownDeadLetter
from shared.errors import PermanentError
from shared.retry import RetryPolicy
from tests.helpers import eventually, messages

SUBJECT = subjects.work("drafter", "ticket.created")  # a consumer the catalog declares


def raw_bytes(data: bytes, headers: Mapping[str, str]) -> bytes:
    return data  # any bytes reach the handler, so the payload is not limited to envelopes


def spec(handler: Any) -> Consumer:
    return Consumer(
        name="drafter",
        stream=subjects.WORK,
        subjects=(subjects.work_for("drafter"),),
        handler=handler,
        decode=raw_bytes,
        retry=RetryPolicy(initial=0.1, jitter=0),
        ack_wait=2.0,
    )


@asynccontextmanager
async def running(bus: Bus, handler: Any) -> AsyncIterator[None]:
    runtime = ConsumerRuntime(bus, "drafter", spec(handler), fetch_timeout=0.5)
    await runtime.start()
    try:
        yield
    finally:
        await runtime.stop(timeout=5)


async def refuse(d: Delivery[bytes]) -> None:
    raise PermanentError(f"ticket {d.headers.get('X-Ticket')} does not exist")


async def dead_letter(bus: Bus, *payloads: bytes) -> None:
    """Publish each payload and let a handler that always fails permanently dead-letter it."""
    before = await deadletters.count(bus.js)
    async with running(bus, refuse):
        for n, payload in enumerate(payloads, start=1):
            await bus.publish(
                SUBJECT, payload, msg_id=f"helpdesk:e{before + n}", headers={"X-Ticket": f"T{n}"}
            )

        async def written() -> bool:
            return await deadletters.count(bus.js) == before + len(payloads)

        await eventually(written, message="the dead letters")


async def test_an_empty_dlq_lists_nothing_and_knows_no_id(bus: Bus) -> None:
    assert await deadletters.list_dead_letters(bus.js) == []
    assert await deadletters.list_dead_letters(bus.js, after=7) == []
    assert await deadletters.count(bus.js) == 0
    assert await deadletters.get_dead_letter(bus.js, 1) is None
    assert await deadletters.get_dead_letter(bus.js, 0) is None
    with pytest.raises(UnknownDeadLetter):
        await deadletters.replay(bus, 1)


async def test_list_and_get_show_the_facts_payload_and_original_headers(bus: Bus) -> None:
    binary = b"\xff\xfe\x00 not utf-8"
    await dead_letter(bus, b'{"ticket": "T1"}', binary)

    first, second = await deadletters.list_dead_letters(bus.js)
    assert (first.id, second.id) == (1, 2)
    assert first.service == "drafter"
    assert first.consumer == "drafter"
    assert (first.stream, first.stream_seq) == (subjects.WORK, 1)
    assert first.subject == SUBJECT
    assert first.attempts == 1
    assert first.reason == "permanent"
    assert first.error == "ticket T1 does not exist"
    assert abs(dt.datetime.now(dt.UTC) - first.time) < dt.timedelta(minutes=1)
    assert first.original_msg_id == "helpdesk:e1"
    assert first.headers == {"X-Ticket": "T1", "Desk-Original-Msg-Id": "helpdesk:e1"}
    assert first.payload == '{"ticket": "T1"}'
    assert first.payload_size == 16
    assert second.payload == binary.decode("utf-8", errors="replace")
    assert second.payload_size == len(binary)

    assert await deadletters.get_dead_letter(bus.js, 2) == second
    assert await deadletters.get_dead_letter(bus.js, 3) is None
    assert await deadletters.count(bus.js) == 2


async def test_a_large_payload_is_truncated_for_display_only(bus: Bus) -> None:
    big = b"x" * (deadletters.PAYLOAD_DISPLAY_LIMIT + 10)
    await dead_letter(bus, big)
    letter = await deadletters.get_dead_letter(bus.js, 1)
    assert letter is not None
    assert len(letter.payload) == deadletters.PAYLOAD_DISPLAY_LIMIT
    assert letter.payload_size == len(big)


async def test_replay_republishes_the_exact_bytes_and_removes_the_dead_letter(bus: Bus) -> None:
    payload = b"\xff\xfe\x00 exact bytes \r\n"
    await dead_letter(bus, b"other", payload)
    received: list[Delivery[bytes]] = []

    async def fixed(d: Delivery[bytes]) -> None:
        received.append(d)

    async with running(bus, fixed):  # the consumer, its bug fixed
        result = await deadletters.replay(bus, 2)
        await eventually(lambda: len(received) == 1, message="the replayed message")

    assert result.subject == SUBJECT
    assert (result.stream, result.duplicate) == (subjects.WORK, False)
    [delivery] = received
    assert delivery.data == payload
    assert delivery.subject == SUBJECT
    assert delivery.stream_seq == result.seq
    assert delivery.headers["Nats-Msg-Id"] == "replay:2"  # the broker dedups the replay
    assert delivery.msg_id == "helpdesk:e2"  # handlers see the original id, so their dedup holds
    assert delivery.headers["Desk-Original-Msg-Id"] == "helpdesk:e2"
    assert delivery.headers["X-Ticket"] == "T2"
    assert not [k for k in delivery.headers if k.startswith("Desk-Dlq-")]

    assert await deadletters.count(bus.js) == 1
    assert [d.id for d in await deadletters.list_dead_letters(bus.js)] == [1]
    assert await deadletters.get_dead_letter(bus.js, 2) is None
    with pytest.raises(UnknownDeadLetter, match="no dead letter with id 2"):
        await deadletters.replay(bus, 2)
    assert len(await messages(bus.js, subjects.WORK)) == 3  # two originals, one replay


async def test_replay_all_replays_what_is_outstanding_once_even_when_it_fails_again(
    bus: Bus,
) -> None:
    """The consumer still refuses: every replayed letter comes back as a new one, and Replay
    all ends after the letters it found, leaving the new ones for the next call."""
    await dead_letter(bus, b"one", b"two")
    async with running(bus, refuse):
        replayed, refused = await deadletters.replay_all(bus)

        async def back() -> bool:
            return [d.id for d in await deadletters.list_dead_letters(bus.js)] == [3, 4]

        await eventually(back, message="both replays dead-lettered again")
    assert ([r.id for r in replayed], refused) == ([1, 2], {})
    assert [r.duplicate for r in replayed] == [False, False]


async def test_a_replay_interrupted_before_the_delete_is_not_published_twice(bus: Bus) -> None:
    await dead_letter(bus, b"once")
    letter = await deadletters.get_dead_letter(bus.js, 1)
    assert letter is not None
    # The first attempt published, then died before deleting the dead letter.
    first = await bus.publish(letter.subject, b"once", msg_id=ids.replay(1), headers=letter.headers)

    result = await deadletters.replay(bus, 1)

    assert result.duplicate
    assert (result.stream, result.seq) == (first.stream, first.seq)
    assert await deadletters.count(bus.js) == 0
    assert [m.data for m in await messages(bus.js, subjects.WORK)] == [b"once", b"once"]


async def test_paging_by_id_skips_removed_dead_letters(bus: Bus) -> None:
    await dead_letter(bus, *(f"p{n}".encode() for n in range(1, 6)))
    await bus.js.delete_msg(subjects.DLQ, 3)

    async def pages(size: int) -> list[list[int]]:
        found, after = [], None
        while page := await deadletters.list_dead_letters(bus.js, limit=size, after=after):
            found.append([d.id for d in page])
            after = page[-1].id
        return found

    assert await pages(2) == [[1, 2], [4, 5]]
    assert await pages(10) == [[1, 2, 4, 5]]
    assert [d.payload for d in await deadletters.list_dead_letters(bus.js, after=2)] == [
        "p4",
        "p5",
    ]
    assert await deadletters.list_dead_letters(bus.js, after=5) == []


# `desk dlq`: the command functions, parsed the way `desk` parses them.


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="desk")
    dlq.add_arguments(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["dlq", *argv])


async def desk_dlq(url: str, *argv: str) -> int:
    """Run the command as the CLI does (its own event loop), off this test's loop."""
    return await asyncio.to_thread(dlq.main, parse(*argv), url, NatsAuth())


async def test_cli_list_prints_a_table_with_redacted_errors(
    bus: Bus, nats_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    async def refuse_with_detail(d: Delivery[bytes]) -> None:
        raise PermanentError("customer bob@example.com has no ticket " + "and a long story " * 9)

    async with running(bus, refuse_with_detail):
        await bus.publish(SUBJECT, b"{}", msg_id="helpdesk:e1")
        await eventually(lambda: deadletters.count(bus.js), message="the dead letter")

    assert await desk_dlq(nats_server.url, "list") == 0
    out = capsys.readouterr().out
    header, row, _blank, summary = out.splitlines()
    assert header.split() == [
        "ID", "TIME", "(UTC)", "SERVICE", "SUBJECT", "ATTEMPTS", "REASON", "ERROR"
    ]  # fmt: skip
    assert row.split()[:1] + row.split()[3:7] == ["1", "drafter", SUBJECT, "1", "permanent"]
    assert "bob@example.com" not in out
    assert "customer [email] has no ticket" in row
    assert row.endswith("…")
    error = row[row.index("customer") :]
    assert len(error) == dlq.ERROR_WIDTH
    assert summary == "1 shown, 1 outstanding"


async def test_cli_show_and_replay(
    bus: Bus, nats_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    await dead_letter(bus, b'{"ticket": "T1", "body": "hello"}')

    assert await desk_dlq(nats_server.url, "show", "1") == 0
    out = capsys.readouterr().out
    assert "reason:          permanent" in out
    assert f"subject:         {SUBJECT}" in out
    assert "original msg id: helpdesk:e1" in out
    assert "  X-Ticket: T1" in out
    assert out.rstrip().endswith('{"ticket": "T1", "body": "hello"}')

    assert await desk_dlq(nats_server.url, "replay", "1") == 1  # no terminal to confirm on
    assert "not replayed" in capsys.readouterr().err
    assert await deadletters.count(bus.js) == 1

    assert await desk_dlq(nats_server.url, "replay", "1", "--yes") == 0
    out = capsys.readouterr().out
    assert f"replayed dead letter 1 to {SUBJECT} (WORK seq 2)" in out
    assert "0 outstanding" in out

    assert await desk_dlq(nats_server.url, "list") == 0
    assert capsys.readouterr().out.strip() == "no dead letters"


async def test_cli_unknown_id_and_unreachable_nats_exit_non_zero(
    bus: Bus, nats_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (("show", "42"), ("replay", "42", "--yes")):
        assert await desk_dlq(nats_server.url, *argv) == 1
        captured = capsys.readouterr()
        assert "no dead letter with id 42" in captured.err
        assert captured.out == ""

    nowhere = f"nats://127.0.0.1:{free_port('127.0.0.1')}"
    assert await desk_dlq(nowhere, "list") == 1
    assert "cannot connect to NATS" in capsys.readouterr().err
