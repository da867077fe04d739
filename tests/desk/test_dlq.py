"""`desk dlq replay --all`: every outstanding dead letter, with the one confirmation a single
replay asks for; the count replayed, and each letter that could not be, by id and why."""

from __future__ import annotations

from typing import Any

import pytest

from shared import deadletters, subjects
from shared.bus import Bus
from tests.shared.test_deadletters import dead_letter, desk_dlq, parse


async def test_replay_all_replays_each_letter_and_names_the_ones_it_could_not(
    bus: Bus, nats_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    await dead_letter(bus, b'{"n": 1}', b'{"n": 2}', b'{"n": 3}')
    gone = await deadletters.get_dead_letter(bus.js, 2)
    assert gone is not None
    await bus.js.delete_msg(subjects.WORK, gone.stream_seq)  # its original aged out

    assert await desk_dlq(nats_server.url, "replay", "--all") == 1  # no terminal to confirm on
    assert "not replayed (pass --yes" in capsys.readouterr().err
    assert await deadletters.count(bus.js) == 3

    assert await desk_dlq(nats_server.url, "replay", "--all", "--yes") == 1
    captured = capsys.readouterr()
    summary, failed, reason = captured.out.splitlines()
    assert summary == "replayed 2 dead letters; 1 outstanding"
    assert failed == "1 not replayed:"
    assert reason.startswith("  2: ") and "no longer holds message" in reason
    assert captured.err == "desk dlq replay: 1 dead letter not replayed (see above)\n"
    [kept] = await deadletters.list_dead_letters(bus.js)
    assert kept.id == 2


def test_replay_without_an_id_or_all_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse("replay", "--yes")
    assert exited.value.code == 2
    assert "one of the arguments id --all is required" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse("replay", "3", "--all")  # one or every, not both
