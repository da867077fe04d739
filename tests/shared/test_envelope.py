from __future__ import annotations

import json

import pytest

from shared.envelope import Envelope, decode, decode_json
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
