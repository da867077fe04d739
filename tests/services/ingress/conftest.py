"""A real ingress process (uvicorn on a free port) publishing to a real nats-server.

One broker and one ingress for the whole package (the tests tell their events apart by id):
starting a process is most of what these tests cost.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from desk.natsserver import NatsServer
from shared.bus import Bus
from shared.signatures import standard_sign
from tests.services_running import ServiceProcess

SECRET = "whsec_" + base64.b64encode(b"current-helpdesk-secret-32bytes!").decode()
OLD_SECRET = "whsec_" + base64.b64encode(b"previous-helpdesk-secret-rotated").decode()
STRIPE_SECRET = "whsec_billing_secret"
GITHUB_SECRET = "github-secret"
BASIC = "inbound:mail-relay-password"

SOURCES: dict[str, dict[str, Any]] = {
    "helpdesk": {"scheme": "standard", "secrets": ["env:TEST_HELPDESK_SECRET", OLD_SECRET]},
    "billing": {
        "scheme": "stripe",
        "secrets": [STRIPE_SECRET],
        "stored_headers": ["content-type", "x-request-id"],
    },
    "github": {
        "scheme": "github",
        "secrets": [GITHUB_SECRET],
        "id_path": None,
        "type_path": None,
        "event_types": ["issues", "issue_comment"],
    },
    "email": {
        "scheme": "basic",
        "secrets": [BASIC],
        "id_path": "MessageID",
        "id_with_digest": True,
        "type_path": None,
        "type_value": "email.received",
    },
}


BODY_TIMEOUT = 1.0  # seconds; short, so a stalled body is answered quickly


def ingress_env(nats_url: str) -> dict[str, str]:
    return {
        "DESK_NATS_URL": nats_url,
        "DESK_SOURCES": json.dumps(SOURCES),
        "DESK_BODY_TIMEOUT": str(BODY_TIMEOUT),
        "TEST_HELPDESK_SECRET": SECRET,
    }


def signed(
    body: bytes | dict[str, Any],
    *,
    secret: str = SECRET,
    msg_id: str = "evt_1",
    stamp: int | None = None,
) -> tuple[bytes, dict[str, str]]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    stamp = int(time.time()) if stamp is None else stamp
    return data, {
        "content-type": "application/json",
        "webhook-id": msg_id,
        "webhook-timestamp": str(stamp),
        "webhook-signature": standard_sign(secret, msg_id, stamp, data),
    }


@pytest.fixture(scope="package")
def module_nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    root = tmp_path_factory.mktemp("nats")
    server = NatsServer(root / "store", sync_always=False, log_file=root / "nats.log")
    server.start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture(scope="package")
def ingress_process(
    module_nats: NatsServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    log: Path = tmp_path_factory.mktemp("ingress") / "ingress.log"
    service = ServiceProcess(["ingress"], ingress_env(module_nats.url), log).start()
    try:
        yield service
    finally:
        service.stop()


@pytest.fixture(scope="package")
def ingress(ingress_process: ServiceProcess) -> str:
    return ingress_process.url


@pytest.fixture
async def events(module_nats: NatsServer) -> AsyncIterator[Bus]:
    bus = await Bus.connect(module_nats.url, service="test")
    try:
        yield bus
    finally:
        await bus.close()
