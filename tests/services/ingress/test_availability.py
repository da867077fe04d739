"""Ingress when the broker goes away and comes back, and under arbitrary input."""

from __future__ import annotations

import string
import time
from pathlib import Path

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from desk.natsserver import NatsServer
from tests.services_running import ServiceProcess

from .conftest import ingress_env, signed


def test_nats_down_answers_503_and_nats_back_answers_202_without_a_restart(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    service = ServiceProcess(["ingress"], ingress_env(nats_server.url), tmp_path / "i.log").start()
    try:
        url = f"{service.url}/webhooks/helpdesk"
        body, headers = signed({"id": "evt_a", "type": "ticket.created"}, msg_id="evt_a")
        assert httpx.post(url, content=body, headers=headers).status_code == 202

        nats_server.stop()
        body, headers = signed({"id": "evt_b", "type": "ticket.created"}, msg_id="evt_b")
        down = httpx.post(url, content=body, headers=headers, timeout=15)
        assert down.status_code == 503
        assert int(down.headers["Retry-After"]) > 0
        assert httpx.get(f"{service.ops_url}/readyz").status_code == 503
        assert httpx.get(f"{service.ops_url}/healthz").status_code == 200

        nats_server.start()  # same port, same store
        deadline = time.monotonic() + 20
        while True:
            body, headers = signed({"id": "evt_b", "type": "ticket.created"}, msg_id="evt_b")
            again = httpx.post(url, content=body, headers=headers, timeout=15)
            if again.status_code == 202 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert again.status_code == 202
        assert again.json()["duplicate"] is False
        assert service.proc is not None and service.proc.poll() is None
    finally:
        service.stop()


header_names = st.text(
    alphabet=string.ascii_letters + string.digits + "-_", min_size=1, max_size=30
)
header_values = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=80)
known_headers = st.sampled_from(
    ["content-type", "webhook-id", "webhook-timestamp", "webhook-signature", "content-length"]
)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    source=st.sampled_from(["helpdesk", "billing", "github", "email", "nope", "%2e%2e", "a" * 300]),
    body=st.one_of(st.binary(max_size=2048), st.text(max_size=512).map(str.encode)),
    headers=st.dictionaries(st.one_of(known_headers, header_names), header_values, max_size=8),
    method=st.sampled_from(["POST", "POST", "GET", "PUT"]),
)
def test_arbitrary_requests_never_get_a_500(
    ingress: str, source: str, body: bytes, headers: dict[str, str], method: str
) -> None:
    headers = {k: v for k, v in headers.items() if k.lower() != "content-length"}
    try:
        answer = httpx.request(
            method, f"{ingress}/webhooks/{source}", content=body, headers=headers, timeout=10
        )
    except httpx.HTTPError:
        return  # the client refused to send it; nothing reached the server
    assert answer.status_code in {202, 400, 401, 404, 405, 413, 415}, answer.text


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    document=st.one_of(
        json_values,
        st.fixed_dictionaries(
            {"id": json_values, "type": json_values}, optional={"data": json_values}
        ),
    ),
    msg_id=st.text(alphabet=string.ascii_letters + string.digits + "_-.:", min_size=1, max_size=40),
)
def test_arbitrary_signed_json_is_stored_or_refused_with_a_400(
    ingress: str, document: object, msg_id: str
) -> None:
    import json

    body, headers = signed(json.dumps(document).encode(), msg_id=msg_id)
    answer = httpx.post(f"{ingress}/webhooks/helpdesk", content=body, headers=headers, timeout=10)
    assert answer.status_code in {202, 400}, answer.text
