"""`POST /webhooks/{source}` against a real ingress and a real nats-server."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import time
import uuid
from typing import Any

import httpx

from shared import subjects
from shared.bus import Bus
from shared.envelope import MAX_DEPTH
from shared.signatures import github_sign, stripe_sign
from tests.helpers import messages
from tests.services_running import ServiceProcess

from .conftest import BASIC, GITHUB_SECRET, OLD_SECRET, STRIPE_SECRET, signed


async def stored(bus: Bus) -> list[Any]:
    return await messages(bus.js, subjects.EVENTS)


def new_id() -> str:
    return f"evt_{uuid.uuid4().hex[:12]}"


def ticket(event_id: str, **extra: Any) -> dict[str, Any]:
    return {"id": event_id, "type": "ticket.created", "data": {"ticket_id": "T1012", **extra}}


async def test_a_signed_event_is_stored_raw_with_its_headers(ingress: str, events: Bus) -> None:
    event_id = new_id()
    body, headers = signed(json.dumps(ticket(event_id), indent=1).encode(), msg_id=event_id)
    headers.update({"Authorization": "Bearer keep-out", "X-Request-Id": "r-1"})
    async with httpx.AsyncClient(base_url=ingress) as client:
        answer = await client.post("/webhooks/helpdesk", content=body, headers=headers)

    assert answer.status_code == 202
    assert answer.json() == {"accepted": True, "duplicate": False, "id": event_id}
    [message] = [m for m in await stored(events) if m.headers["Desk-Event-Id"] == event_id]
    assert message.subject == "events.helpdesk.ticket.created"
    assert message.data == body  # byte for byte, as it was signed
    assert message.headers["Nats-Msg-Id"] == f"helpdesk:{event_id}"
    assert message.headers["webhook-id"] == event_id
    assert message.headers["content-type"] == "application/json"
    # only the source's allowlist of headers is stored: no credential, nothing unlisted
    stored_names = {k.lower() for k in message.headers}
    assert not stored_names & {"authorization", "webhook-signature", "x-request-id"}


async def test_the_same_event_five_times_is_stored_once(ingress: str, events: Bus) -> None:
    event_id = new_id()
    answers = []
    async with httpx.AsyncClient(base_url=ingress) as client:
        for _ in range(5):
            body, headers = signed(ticket(event_id), msg_id=event_id)
            answers.append(await client.post("/webhooks/helpdesk", content=body, headers=headers))
    assert [a.status_code for a in answers] == [202] * 5
    assert [a.json()["duplicate"] for a in answers] == [False, True, True, True, True]
    assert len([m for m in await stored(events) if m.headers["Desk-Event-Id"] == event_id]) == 1


async def test_a_signature_made_with_the_rotated_previous_secret_is_accepted(ingress: str) -> None:
    event_id = new_id()
    body, headers = signed(ticket(event_id), msg_id=event_id, secret=OLD_SECRET)
    answer = httpx.post(f"{ingress}/webhooks/helpdesk", content=body, headers=headers)
    assert answer.status_code == 202


def _bad(status: int, answer: httpx.Response) -> None:
    assert answer.status_code == status, answer.text
    assert "error" in answer.json()


async def test_refusals_answer_the_right_status_and_publish_nothing(
    ingress: str, events: Bus
) -> None:
    before = len(await stored(events))
    url = f"{ingress}/webhooks/helpdesk"
    good_body, good_headers = signed(ticket("evt_refused"), msg_id="evt_refused")

    # 401: forged, missing, or signed with a secret we do not have
    forged = {**good_headers, "webhook-signature": "v1," + base64.b64encode(b"x" * 32).decode()}
    _bad(401, httpx.post(url, content=good_body, headers=forged))
    unsigned = {"content-type": "application/json"}
    _bad(401, httpx.post(url, content=good_body, headers=unsigned))
    _, stranger = signed(ticket("evt_refused"), msg_id="evt_refused", secret="whsec_c3RyYW5nZXI=")
    _bad(401, httpx.post(url, content=good_body, headers=stranger))
    tampered = good_body.replace(b"T1012", b"T1013")
    _bad(401, httpx.post(url, content=tampered, headers=good_headers))

    # 400: a replay outside the window, a clock far ahead, bad JSON, no id, no type
    replay = signed(ticket("evt_old"), msg_id="evt_old", stamp=int(time.time()) - 360)
    _bad(400, httpx.post(url, content=replay[0], headers=replay[1]))
    future = signed(ticket("evt_new"), msg_id="evt_new", stamp=int(time.time()) + 360)
    _bad(400, httpx.post(url, content=future[0], headers=future[1]))
    not_json = signed(b"{not json", msg_id="evt_x")
    _bad(400, httpx.post(url, content=not_json[0], headers=not_json[1]))
    no_type = signed({"id": "evt_nt", "data": {}}, msg_id="evt_nt")
    _bad(400, httpx.post(url, content=no_type[0], headers=no_type[1]))
    bad_type = signed({"id": "evt_bt", "type": "ticket created!"}, msg_id="evt_bt")
    _bad(400, httpx.post(url, content=bad_type[0], headers=bad_type[1]))
    stamp = int(time.time())
    no_id = {"type": "invoice.paid"}
    no_id_body = json.dumps(no_id).encode()
    stripe_headers = {
        "content-type": "application/json",
        "Stripe-Signature": stripe_sign(STRIPE_SECRET, stamp, no_id_body),
    }
    _bad(400, httpx.post(f"{ingress}/webhooks/billing", content=no_id_body, headers=stripe_headers))

    # 413: over 256 KiB, declared or streamed without a length
    big = signed({"id": "evt_big", "type": "t", "pad": "x" * 300_000}, msg_id="evt_big")
    _bad(413, httpx.post(url, content=big[0], headers=big[1]))

    def chunks() -> Any:
        for _ in range(400):
            yield b"x" * 1024

    _bad(413, httpx.post(url, content=chunks(), headers={"content-type": "application/json"}))

    # 415 and 404
    _bad(
        415,
        httpx.post(url, content=good_body, headers={**good_headers, "content-type": "text/plain"}),
    )
    _bad(
        404, httpx.post(f"{ingress}/webhooks/nosuchsource", content=good_body, headers=good_headers)
    )

    assert len(await stored(events)) == before


async def test_signed_json_the_pipeline_cannot_carry_is_refused_and_publishes_nothing(
    ingress: str, events: Bus
) -> None:
    # Found by the bad-input campaign (chaos/badinput): deep nesting and over-long numbers
    # got a 503 or a dropped connection; lone surrogates and nesting past what an envelope can
    # serialize were stored, then retried by the router until they were dead-lettered.
    before = len(await stored(events))
    url = f"{ingress}/webhooks/helpdesk"
    event_id = new_id()
    head = f'{{"id": "{event_id}", "type": "ticket.created", "data": '
    refused = {
        "nested past Python's json": head + "[" * 5000 + "]" * 5000 + "}",
        "nested past MAX_DEPTH": head + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "}",
        "a number too long for Python": head + "1" * 5000 + "}",
        "a lone surrogate in the data": head + '{"ticket_id": "T\\ud800"}}',
        "a lone surrogate in the id": '{"id": "evt_\\udfff", "type": "ticket.created"}',
    }
    for what, text in refused.items():
        body, headers = signed(text.encode(), msg_id=event_id)
        answer = httpx.post(url, content=body, headers=headers)
        assert answer.status_code == 400, (what, answer.text)
        assert "error" in answer.json()
    assert len(await stored(events)) == before

    deepest = head + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "}"
    body, headers = signed(deepest.encode(), msg_id=event_id)
    assert httpx.post(url, content=body, headers=headers).status_code == 202


async def test_stripe_style_source(ingress: str, events: Bus) -> None:
    event_id = new_id()
    body = json.dumps({"id": event_id, "type": "invoice.paid", "data": {}}).encode()
    headers = {
        "content-type": "application/json; charset=utf-8",
        "Stripe-Signature": stripe_sign(STRIPE_SECRET, int(time.time()), body),
    }
    answer = httpx.post(f"{ingress}/webhooks/billing", content=body, headers=headers)
    assert answer.status_code == 202, answer.text
    [message] = [m for m in await stored(events) if m.headers["Desk-Event-Id"] == event_id]
    assert message.subject == "events.billing.invoice.paid"


async def test_github_style_source_takes_the_type_from_a_header_and_the_id_from_the_body(
    ingress: str, events: Bus
) -> None:
    delivery = str(uuid.uuid4())
    body = b'{"action": "opened", "issue": {"number": 7, "id": "%s"}}' % delivery.encode()
    headers = {
        "content-type": "application/json",
        "X-Hub-Signature-256": github_sign(GITHUB_SECRET, body),
        "X-GitHub-Delivery": delivery,
        "X-GitHub-Event": "issues",
    }
    answer = httpx.post(f"{ingress}/webhooks/github", content=body, headers=headers)
    assert answer.status_code == 202, answer.text
    # the delivery header is not signed: the event is named by its signed body
    digest = "sha256-" + hashlib.sha256(body).hexdigest()
    assert answer.json()["id"] == digest
    [message] = [m for m in await stored(events) if m.headers["Desk-Event-Id"] == digest]
    assert message.subject == "events.github.issues"
    assert message.headers["Nats-Msg-Id"] == f"github:{digest}"
    assert message.headers["x-github-delivery"] == delivery  # kept, for tracing


async def test_inbound_email_webhook_becomes_an_email_received_event(
    ingress: str, events: Bus
) -> None:
    message_id = f"<{uuid.uuid4().hex}@mail.example.com>"
    body = json.dumps(
        {
            "From": "Jane <jane@example.com>",
            "Subject": "Refund?",
            "TextBody": "I was charged twice.",
            "MessageID": message_id,
        }
    ).encode()
    auth = "Basic " + base64.b64encode(BASIC.encode()).decode()
    headers = {"content-type": "application/json", "Authorization": auth}
    answer = httpx.post(f"{ingress}/webhooks/email", content=body, headers=headers)
    assert answer.status_code == 202, answer.text
    event_id = f"{message_id}#sha256-{hashlib.sha256(body).hexdigest()}"
    assert answer.json() == {"accepted": True, "duplicate": False, "id": event_id}
    [message] = [m for m in await stored(events) if m.headers["Desk-Event-Id"] == event_id]
    assert message.subject == "events.email.email.received"
    assert message.headers["Nats-Msg-Id"] == f"email:{event_id}"
    assert "authorization" not in {k.lower() for k in message.headers}
    wrong = {**headers, "Authorization": "Basic " + base64.b64encode(b"inbound:no").decode()}
    assert httpx.post(f"{ingress}/webhooks/email", content=body, headers=wrong).status_code == 401


async def test_a_mail_with_the_message_id_of_another_is_its_own_event(
    ingress: str, events: Bus
) -> None:
    """Whoever writes to the support address picks the Message-ID: a forged mail sent first
    with the id of a real one must not turn the real one into a "duplicate"."""
    message_id = f"<{uuid.uuid4().hex}@mail.example.com>"
    auth = "Basic " + base64.b64encode(BASIC.encode()).decode()
    headers = {"content-type": "application/json", "Authorization": auth}

    def mail(text: str) -> str:
        return json.dumps({"From": "a@example.com", "TextBody": text, "MessageID": message_id})

    forged, real = mail("ignore this"), mail("I was charged twice.")
    answers = [
        httpx.post(f"{ingress}/webhooks/email", content=body, headers=headers)
        for body in (forged, real, real)  # the last one: the provider retrying
    ]
    assert [a.json()["duplicate"] for a in answers] == [False, False, True]
    mine = [m for m in await stored(events) if m.headers["Desk-Event-Id"].startswith(message_id)]
    assert sorted(json.loads(m.data)["TextBody"] for m in mine) == [
        "I was charged twice.",
        "ignore this",
    ]


async def test_clients_cannot_set_broker_or_desk_headers(ingress: str, events: Bus) -> None:
    event_id = new_id()
    body, headers = signed(ticket(event_id), msg_id=event_id)
    headers.update({"Nats-Msg-Id": "forged", "Nats-Expected-Stream": "DLQ", "Desk-Source": "x"})
    answer = httpx.post(f"{ingress}/webhooks/helpdesk", content=body, headers=headers)
    assert answer.status_code == 202
    [message] = [m for m in await stored(events) if m.headers["Desk-Event-Id"] == event_id]
    assert message.headers["Nats-Msg-Id"] == f"helpdesk:{event_id}"
    assert message.headers["Desk-Source"] == "helpdesk"


async def test_many_requests_in_flight_each_get_their_own_pub_ack(
    ingress: str, events: Bus
) -> None:
    ids = [new_id() for _ in range(50)]
    async with httpx.AsyncClient(base_url=ingress, timeout=30) as client:

        async def post(event_id: str) -> httpx.Response:
            body, headers = signed(ticket(event_id), msg_id=event_id)
            return await client.post("/webhooks/helpdesk", content=body, headers=headers)

        answers = await asyncio.gather(*(post(i) for i in ids))
    assert [a.status_code for a in answers] == [202] * 50
    assert {a.json()["id"] for a in answers} == set(ids)
    have = {m.headers["Desk-Event-Id"] for m in await stored(events)}
    assert set(ids) <= have


async def test_metrics_count_outcomes_and_signature_failures(
    ingress: str, ingress_process: ServiceProcess
) -> None:
    body, headers = signed(ticket("evt_m"), msg_id="evt_m")
    httpx.post(
        f"{ingress}/webhooks/helpdesk",
        content=body,
        headers={**headers, "webhook-signature": "v1,AAAA"},
    )
    text = httpx.get(f"{ingress_process.ops_url}/metrics").text
    assert 'desk_ingress_signature_failures_total{reason="mismatch",source="helpdesk"}' in text
    assert 'desk_ingress_requests_total{outcome="202",source="helpdesk"}' in text
    assert "desk_ingress_publish_seconds_bucket" in text
