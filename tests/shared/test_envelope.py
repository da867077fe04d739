from __future__ import annotations

import json

import pytest

from shared.envelope import MAX_DEPTH, Envelope, decode, decode_json
from shared.errors import PermanentError


def test_round_trip_keeps_cloudevents_attributes() -> None:
    env = Envelope(
        source="/desk/drafter", type="inbox.item", subject="T1012", data={"v": 1}, correlationid="c"
    )
    wire = json.loads(env.to_bytes())
    assert wire["specversion"] == "1.0"
    assert {"id", "source", "type", "subject", "time", "data"} <= set(wire)
    assert decode(env.to_bytes()) == env


@pytest.mark.parametrize(
    "data",
    [
        b"\xff\xfe garbage",
        b"[]",
        b'{"specversion": "0.3", "id": "1", "source": "s", "type": "t"}',
        b'{"id": "1", "type": "t"}',
    ],
)
def test_anything_else_is_a_permanent_error(data: bytes) -> None:
    with pytest.raises(PermanentError):
        decode(data)


def test_raw_json_decoding_refuses_non_json() -> None:
    assert decode_json(b'{"a": 1}') == {"a": 1}
    with pytest.raises(PermanentError):
        decode_json(b"\x00\x01")


@pytest.mark.parametrize(
    "data",
    [
        b"[" * 5000 + b"]" * 5000,  # past Python's recursion limit
        b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1),
        b'{"a": ' * (MAX_DEPTH + 1) + b"1" + b"}" * (MAX_DEPTH + 1),
        b"1" * 5000,  # more digits than Python converts
        b'{"ticket_id": "T\\ud800"}',  # a lone surrogate: no UTF-8 for it
        b'{"\\udfff": 1}',
    ],
)
def test_raw_json_an_envelope_cannot_carry_is_a_permanent_error(data: bytes) -> None:
    with pytest.raises(PermanentError):
        decode_json(data)


def test_raw_json_up_to_the_depth_limit_round_trips_through_an_envelope() -> None:
    deepest = decode_json(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH)
    pair = decode_json(b'"\\ud83d\\ude00"')  # an escaped surrogate pair is one code point
    assert pair == "\U0001f600"
    for value in (deepest, pair):
        wire = Envelope(source="/desk/router", type="ticket.created", data=value).to_bytes()
        assert decode(wire).data == value
