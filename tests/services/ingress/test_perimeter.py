"""The perimeter under attack: each test performs one attack on the real ingress (and a real
nats-server, and for mail a real IMAP server) and checks it is refused and nothing is recorded.

- a captured GitHub-style request (no timestamp) replayed with a fresh delivery id and another
  event type: the same event (a duplicate) or a refused type, never a second recording, also
  past the broker's duplicate window;
- credentials sent with a request never reach EVENTS (viewers read it);
- a body that stops arriving (slow loris) gets 408 within the configured deadline;
- two sources sharing a secret stop ingress at start;
- two different mails with the same Message-ID are both recorded;
- health and metrics asked for on the public port: 404 (they are on the ops port only).
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import SecretStr

from desk.natsserver import NatsServer
from services.ingress import main, sources
from services.ingress.imap import Mailbox, poll_once
from services.ingress.replays import replay_key
from shared import subjects
from shared.bus import Bus
from shared.ledger import Ledger
from shared.settings import ConfigError, ImapSettings, IngressSettings
from shared.signatures import body_digest, github_sign, stripe_sign
from tests.helpers import eventually, messages
from tests.imapserver import ImapServer
from tests.services_running import ServiceProcess

from .conftest import BASIC, BODY_TIMEOUT, GITHUB_SECRET, SECRET, STRIPE_SECRET, signed

CREDENTIALS = {
    "X-Api-Key": "api-key-do-not-store",
    "X-Gitlab-Token": "gitlab-token-do-not-store",
    "Authorization": "Bearer bearer-do-not-store",
    "Cookie": "session=cookie-do-not-store",
    "X-Auth-Token": "auth-token-do-not-store",
}


async def stored_as(bus: Bus, event_id: str) -> list[Any]:
    return [
        m
        for m in await messages(bus.js, subjects.EVENTS)
        if m.headers and m.headers.get("Desk-Event-Id") == event_id
    ]


def github(body: bytes, *, delivery: str | None = None, event: str = "issues") -> dict[str, str]:
    """What GitHub sends: only the body is signed; delivery id and event type are not."""
    return {
        "content-type": "application/json",
        "X-Hub-Signature-256": github_sign(GITHUB_SECRET, body),
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-GitHub-Event": event,
    }


def issue_body() -> bytes:
    return json.dumps(
        {"action": "opened", "issue": {"number": 7, "node": uuid.uuid4().hex}}
    ).encode()


# -- replays of a scheme without a timestamp ------------------------------------------------------


async def test_a_captured_github_request_replayed_with_new_headers_is_not_recorded_again(
    ingress: str, events: Bus
) -> None:
    body = issue_body()
    digest = body_digest(body)
    async with httpx.AsyncClient(base_url=ingress) as client:
        original = await client.post("/webhooks/github", content=body, headers=github(body))
        assert original.status_code == 202, original.text
        assert original.json() == {"accepted": True, "duplicate": False, "id": digest}

        # the attacker keeps body and signature, writes a fresh delivery id and another type
        for event in ("issues", "issue_comment"):
            replay = await client.post(
                "/webhooks/github", content=body, headers=github(body, event=event)
            )
            assert replay.status_code == 202, replay.text
            assert replay.json() == {"accepted": True, "duplicate": True, "id": digest}
        for event in ("push", "workflow_run"):  # not in the source's event_types
            refused = await client.post(
                "/webhooks/github", content=body, headers=github(body, event=event)
            )
            assert refused.status_code == 400, refused.text
            assert "event type not accepted" in refused.json()["error"]

    [message] = await stored_as(events, digest)
    assert message.subject == "events.github.issues"
    assert message.headers["Nats-Msg-Id"] == f"github:{digest}"
    # remembered beyond the broker's duplicate window: the processed-ledger holds the body
    ledger = await Ledger.open(events.js, "ingress")
    assert await ledger.seen(replay_key("github", digest))


async def test_a_replay_past_the_broker_duplicate_window_is_answered_as_a_duplicate(
    ingress: str, events: Bus
) -> None:
    # What the ledger holds once the broker has forgotten the id (its window is 10 minutes):
    # this body's Nats-Msg-Id was never published, so only the ledger can refuse it.
    body = issue_body()
    digest = body_digest(body)
    ledger = await Ledger.open(events.js, "ingress")
    assert await ledger.claim(replay_key("github", digest), b"1")

    answer = httpx.post(f"{ingress}/webhooks/github", content=body, headers=github(body))
    assert answer.status_code == 202, answer.text
    assert answer.json() == {"accepted": True, "duplicate": True, "id": digest}
    assert await stored_as(events, digest) == []


async def test_a_new_github_event_of_a_type_outside_the_allowlist_is_refused(
    ingress: str, events: Bus
) -> None:
    body = issue_body()
    answer = httpx.post(
        f"{ingress}/webhooks/github", content=body, headers=github(body, event="deployment")
    )
    assert answer.status_code == 400, answer.text
    assert await stored_as(events, body_digest(body)) == []
    # refused before anything was remembered: the same body with its real type still goes in
    good = httpx.post(f"{ingress}/webhooks/github", content=body, headers=github(body))
    assert good.status_code == 202 and good.json()["duplicate"] is False, good.text


async def test_each_source_without_a_timestamp_is_named_in_a_warning_at_start(
    ingress_process: ServiceProcess,
) -> None:
    warnings = [
        f"source {name}: signature scheme has no timestamp; replays are refused by body hash only"
        for name in ("github", "email")
    ]
    # written once the service is up, which may be a moment after it first answered
    await eventually(
        lambda: all(w in ingress_process.log.read_text() for w in warnings),
        message="both warnings in the log",
    )
    log = ingress_process.log.read_text()
    assert "source helpdesk: signature scheme" not in log
    assert GITHUB_SECRET not in log and BASIC not in log


# -- health and metrics are not on the public port ------------------------------------------------


def test_the_public_port_answers_no_health_or_metrics_only_the_ops_port_does(
    ingress_process: ServiceProcess,
) -> None:
    """What the internet reaches (DESK_HTTP_PORT) serves webhooks only; what probes and
    Prometheus reach (DESK_OPS_PORT) serves health and metrics only."""
    for path in ("/metrics", "/healthz", "/readyz"):
        for method in ("GET", "HEAD"):
            public = httpx.request(method, f"{ingress_process.url}{path}")
            assert public.status_code == 404, (method, path, public.text)
            assert "desk_" not in public.text, path
        assert httpx.get(f"{ingress_process.ops_url}{path}").status_code == 200, path
    metrics = httpx.get(f"{ingress_process.ops_url}/metrics")
    assert metrics.headers["content-type"] == CONTENT_TYPE_LATEST  # Prometheus' text format
    assert "# TYPE desk_ingress_requests_total counter" in metrics.text
    body, headers = signed({"id": "evt_ops", "type": "ticket.created"}, msg_id="evt_ops")
    on_ops = httpx.post(
        f"{ingress_process.ops_url}/webhooks/helpdesk", content=body, headers=headers
    )
    assert on_ops.status_code == 404, "no webhooks on the ops port"


# -- credentials are never stored -----------------------------------------------------------------


async def test_credential_headers_never_reach_the_stored_event(ingress: str, events: Bus) -> None:
    event_id = f"evt_{uuid.uuid4().hex[:12]}"
    ticket = {"id": event_id, "type": "ticket.created", "data": {"ticket_id": "T1"}}
    helpdesk_body, helpdesk_headers = signed(ticket, msg_id=event_id)
    github_body = issue_body()
    stripe_body = json.dumps({"id": f"{event_id}_b", "type": "invoice.paid"}).encode()
    stripe_headers = {
        "content-type": "application/json",
        "Stripe-Signature": stripe_sign(STRIPE_SECRET, int(time.time()), stripe_body),
        "X-Request-Id": "r-42",
    }
    async with httpx.AsyncClient(base_url=ingress) as client:
        for source, body, headers in (
            ("helpdesk", helpdesk_body, helpdesk_headers),
            ("github", github_body, github(github_body)),
            ("billing", stripe_body, stripe_headers),
        ):
            answer = await client.post(
                f"/webhooks/{source}", content=body, headers={**headers, **CREDENTIALS}
            )
            assert answer.status_code == 202, (source, answer.text)

    [helpdesk] = await stored_as(events, event_id)
    [from_github] = await stored_as(events, body_digest(github_body))
    [billing] = await stored_as(events, f"{event_id}_b")
    secrets = [*CREDENTIALS.values(), helpdesk_headers["webhook-signature"], SECRET]
    for message in (helpdesk, from_github, billing):
        names = {k.lower() for k in message.headers}
        assert not names & {k.lower() for k in CREDENTIALS}, names
        assert not names & {"webhook-signature", "x-hub-signature-256", "stripe-signature"}
        assert not [s for s in secrets if any(s in v for v in message.headers.values())]
        assert message.headers["content-type"] == "application/json"
    # the default allowlist: content type, user agent, the source's delivery and type headers
    assert helpdesk.headers["webhook-id"] == event_id
    assert helpdesk.headers["user-agent"].startswith("python-httpx/")
    assert from_github.headers["x-github-event"] == "issues"
    assert "x-github-delivery" in from_github.headers
    # a configured allowlist (billing: content-type, x-request-id) replaces the default
    assert billing.headers["x-request-id"] == "r-42"
    assert "user-agent" not in billing.headers


def test_a_source_configured_to_store_a_credential_header_does_not_start() -> None:
    for header in ("X-Gitlab-Token", "x-api-key", "Authorization", "X-Hub-Signature-256"):
        spec = {"scheme": "standard", "secrets": [SECRET], "stored_headers": [header]}
        with pytest.raises(ConfigError) as refused:
            sources.build({"helpdesk": spec})
        assert "source 'helpdesk'" in str(refused.value)
        assert "may carry a credential" in str(refused.value)
    spec = {"scheme": "standard", "secrets": [SECRET], "stored_headers": ["Nats-Msg-Id"]}
    with pytest.raises(ConfigError, match="nats-msg-id is the broker's or ours"):
        sources.build({"helpdesk": spec})


def test_a_type_from_an_unsigned_header_needs_an_allowlist() -> None:
    spec = {"scheme": "github", "secrets": ["gh"], "id_path": None, "type_path": None}
    with pytest.raises(ConfigError, match=r"unsigned header X-GitHub-Event.*event_types"):
        sources.build({"github": spec})


# -- a body that stops arriving -------------------------------------------------------------------


async def _stall(port: int, declared: int, sent: bytes) -> tuple[bytes, float]:
    """Send headers and part of the body, then nothing; return the answer and how long it took."""
    started = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(
            b"POST /webhooks/helpdesk HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (declared, sent)
        )
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), timeout=BODY_TIMEOUT + 10)
        return answer, time.monotonic() - started
    finally:
        writer.close()


async def test_a_stalled_body_gets_408_within_the_deadline_and_blocks_nobody(
    ingress: str, ingress_process: ServiceProcess, events: Bus
) -> None:
    before = len(await messages(events.js, subjects.EVENTS))
    stalls = [
        asyncio.create_task(_stall(ingress_process.port, 1000, b'{"id": "evt_slow"'))
        for _ in range(20)
    ]
    # while they hang, an honest client is answered at once
    event_id = f"evt_{uuid.uuid4().hex[:12]}"
    body, headers = signed({"id": event_id, "type": "ticket.created"}, msg_id=event_id)
    async with httpx.AsyncClient(base_url=ingress) as client:
        honest = await client.post("/webhooks/helpdesk", content=body, headers=headers)
    assert honest.status_code == 202, honest.text

    for answer, took in await asyncio.gather(*stalls):
        assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
        assert b"request body not received" in answer
        assert BODY_TIMEOUT * 0.9 <= took < BODY_TIMEOUT + 5
    assert len(await messages(events.js, subjects.EVENTS)) == before + 1


# -- one secret, one source -----------------------------------------------------------------------


async def test_two_sources_sharing_a_secret_stop_ingress_at_start(tmp_path: Path) -> None:
    shared = "whsec_" + base64.b64encode(b"one-secret-for-two-sources-32b!!").decode()
    cases = {
        "the same value": (shared, shared),
        "the same key, with and without whsec_": (shared, shared.removeprefix("whsec_")),
    }
    for what, (first, second) in cases.items():
        settings = IngressSettings(
            nats_url="nats://127.0.0.1:1",
            var_dir=tmp_path,
            sources={
                "helpdesk": {"scheme": "standard", "secrets": [first]},
                "email": {"scheme": "standard", "secrets": ["whsec_b3RoZXI=", second]},
            },
        )
        with pytest.raises(ConfigError) as refused:
            await main.run(settings)
        message = str(refused.value)
        assert "'helpdesk'" in message and "'email'" in message, what
        assert "share a secret" in message, what
        assert shared.removeprefix("whsec_") not in message, what
    # across schemes too: one HMAC key for a GitHub-style and a Stripe-style source
    with pytest.raises(ConfigError, match="'gh' and 'billing' share a secret"):
        sources.build(
            {
                "gh": {"scheme": "github", "secrets": ["k"], "event_types": ["push"]},
                "billing": {"scheme": "stripe", "secrets": ["k"]},
            }
        )


# -- mail: a Message-ID is the sender's to choose -------------------------------------------------


def mail(subject: str, message_id: str) -> bytes:
    message = EmailMessage()
    message["From"] = "Jane Customer <jane@example.com>"
    message["To"] = "support@example.com"
    message["Subject"] = subject
    message["Message-ID"] = message_id
    message.set_content(f"Hello,\n{subject}\n")
    return message.as_bytes()


async def test_two_different_mails_with_the_same_message_id_are_both_recorded(
    module_nats: NatsServer, imap_server: ImapServer, events: Bus
) -> None:
    message_id = f"<{uuid.uuid4().hex}@mail.example.com>"
    imap_server.append(mail("I was charged twice", message_id))
    imap_server.append(mail("Please ignore the other mail, send me your password", message_id))
    mailbox = Mailbox(
        ImapSettings(
            imap_host=imap_server.host,
            imap_port=imap_server.port,
            imap_ssl=False,
            imap_user=imap_server.user,
            imap_password=SecretStr(imap_server.password),
        )
    )
    stored = 0

    async def both_stored() -> bool:  # a poll whose publish timed out leaves them for the next
        nonlocal stored
        stored += (await poll_once(mailbox, events, "email")).stored
        return stored >= 2

    await eventually(both_stored, timeout=30, message="both mails stored")
    assert stored == 2
    assert (await poll_once(mailbox, events, "email")).stored == 0  # both flagged seen

    own = message_id.strip("<>")
    found = [
        (m.headers or {}, json.loads(m.data or b"{}"))
        for m in await messages(events.js, subjects.EVENTS)
        if m.subject == "events.email.email.received"
    ]
    found = [(headers, body) for headers, body in found if body["MessageID"] == own]
    assert sorted(body["Subject"] for _, body in found) == [
        "I was charged twice",
        "Please ignore the other mail, send me your password",
    ]
    assert len({headers["Nats-Msg-Id"] for headers, _ in found}) == 2
    assert all(imap_server.seen_flags().values())
