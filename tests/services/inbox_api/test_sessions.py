"""The inbox's perimeter, attacked over real HTTP as a user would: a session copied before logout,
kept after its token was removed or demoted, or used past its absolute lifetime; wrong tokens
fired in a row; a login posted from another site; a 2 MiB decision. Then the pieces behind it
(the throttle's buckets, the body reader, the session store) with injected clocks."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hashlib
import json
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from desk.natsserver import NatsServer
from services.inbox_api import store
from services.inbox_api.auth import Reviewers
from services.inbox_api.sessions import COOKIE, Sessions
from services.inbox_api.throttle import Throttle
from shared.bodies import BodyRefused, read_limited
from shared.bus import Bus
from shared.db import database_url, make_engine
from shared.settings import ReviewerConfig
from tests.helpers import eventually
from tests.inbox_items import draft_item, publish_item, published_decisions
from tests.postgres import fresh_schema, url_in
from tests.services_running import ServiceProcess

from .conftest import AUDIT_KEY

ALICE = "alice-token-for-session-tests"
BOB = "bob-token-for-session-tests"
CAROL = "carol-token-for-session-tests"
BURST = 3  # wrong tokens an address may present before 429
LIFETIME = 2.0  # seconds, on the replica with the new configuration
MIB = 1024 * 1024


def sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def reviewers(*entries: tuple[str, str, str]) -> str:
    return json.dumps([{"name": n, "role": r, "token_sha256": sha256(t)} for n, r, t in entries])


@dataclass(frozen=True)
class Running:
    url: str
    log: Path


@pytest.fixture(scope="module")
def var_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("inbox-sessions")


@pytest.fixture(scope="module")
def inbox(inbox_nats: NatsServer, var_dir: Path) -> Iterator[Running]:
    """The inbox with alice and bob as reviewers."""
    yield from _started(
        inbox_nats,
        var_dir,
        "inbox_api",
        DESK_REVIEWERS=reviewers(("alice", "reviewer", ALICE), ("bob", "reviewer", BOB)),
        DESK_AUTH_BURST=str(BURST),
    )


@pytest.fixture(scope="module")
def rollout(inbox: Running, inbox_nats: NatsServer, var_dir: Path) -> Iterator[Running]:
    """A second replica on the same database with a new configuration, as during a rollout:
    bob's token is removed, alice is demoted to viewer, carol is new; sessions last 2 s."""
    yield from _started(
        inbox_nats,
        var_dir,
        "inbox_api-rollout",
        DESK_REVIEWERS=reviewers(("alice", "viewer", ALICE), ("carol", "reviewer", CAROL)),
        DESK_SESSION_LIFETIME=str(LIFETIME),
    )


def _started(nats: NatsServer, var_dir: Path, name: str, **settings: str) -> Iterator[Running]:
    """An inbox_api replica; all of them share one database (and so the inbox's consumer)."""
    env = {
        "DESK_NATS_URL": nats.url,
        "DESK_VAR_DIR": str(var_dir / "var"),
        "DESK_AUDIT_KEY": AUDIT_KEY,
        **settings,
    }
    log = var_dir / f"{name}.log"
    process = ServiceProcess(["inbox_api"], env, log).start()
    try:
        yield Running(process.url, log)
    finally:
        process.kill()


@pytest.fixture
async def alice(inbox: Running) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=inbox.url, timeout=10) as client:
        yield client


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "no CSRF token on the page"
    return found.group(1)


async def log_in(client: httpx.AsyncClient, token: str) -> str:
    """Log in through the form; the CSRF token of the new session."""
    answer = await client.post("/login", data={"token": token})
    assert (answer.status_code, answer.headers.get("location")) == (303, "/inbox"), answer.text
    page = await client.get("/inbox")
    assert page.status_code == 200
    return csrf_of(page.text)


def holding(url: str, cookie: str | None) -> httpx.AsyncClient:
    """Another browser presenting a copy of someone's session cookie."""
    assert cookie
    return httpx.AsyncClient(base_url=url, cookies={COOKIE: cookie}, timeout=10)


async def waiting_item(inbox: Running, bus: Bus) -> str:
    item = draft_item(f"T{uuid.uuid4().hex[:8]}")
    await publish_item(bus, item)
    async with httpx.AsyncClient(base_url=inbox.url, headers=bearer(ALICE)) as c:

        async def listed() -> bool:
            return (await c.get(f"/api/items/{item.id}")).status_code == 200

        await eventually(listed, timeout=15, message=f"{item.id} in the inbox")
    return item.id


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def detail(inbox: Running, item_id: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=inbox.url, headers=bearer(ALICE)) as c:
        answer = await c.get(f"/api/items/{item_id}")
    assert answer.status_code == 200
    found: dict[str, Any] = answer.json()
    return found


# -- sessions ----------------------------------------------------------------------------------


async def test_a_cookie_copied_before_logout_is_refused_after_it(
    inbox: Running, alice: httpx.AsyncClient
) -> None:
    answer = await alice.post("/login", data={"token": ALICE})
    cookie = answer.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "max-age=28800" in cookie
    page = await alice.get("/inbox")
    csrf = csrf_of(page.text)
    async with holding(inbox.url, alice.cookies.get(COOKIE)) as thief:
        assert (await thief.get("/inbox")).status_code == 200  # the copy works while it lives

        out = await alice.post("/logout", data={"csrf": csrf})
        assert (out.status_code, out.headers["location"]) == (303, "/login")

        after = await thief.get("/inbox")
        assert (after.status_code, after.headers["location"]) == (303, "/login")
        assert (await thief.get("/inbox/version")).status_code == 401
        forged = await thief.post("/logout", data={"csrf": csrf})
        assert forged.headers["location"] == "/login"
        decide = await thief.post("/items/T1~v1/decide", data={"type": "accept", "version": "1"})
        assert decide.status_code == 401
    assert (await alice.get("/inbox")).headers["location"] == "/login"


async def test_a_removed_or_demoted_reviewer_loses_the_session_at_the_next_request(
    inbox: Running, rollout: Running, nats_bus: Bus
) -> None:
    item_id = await waiting_item(inbox, nats_bus)
    # each next request reaches the replica that runs with the new configuration
    async with httpx.AsyncClient(base_url=inbox.url, timeout=10) as alice:
        csrf = await log_in(alice, ALICE)
        async with holding(rollout.url, alice.cookies.get(COOKIE)) as demoted:
            page = await demoted.get(f"/items/{item_id}")
            assert page.status_code == 200  # still logged in, as a viewer now
            assert "/decide" not in page.text and "read this inbox but not decide" in page.text
            form = {"type": "accept", "version": "1", "csrf": csrf}
            refused = await demoted.post(f"/items/{item_id}/decide", data=form)
            assert refused.status_code == 403 and "Read only" in refused.text

    async with httpx.AsyncClient(base_url=inbox.url, timeout=10) as bob:
        await log_in(bob, BOB)
        async with holding(rollout.url, bob.cookies.get(COOKIE)) as removed:
            answer = await removed.get("/inbox")
            assert (answer.status_code, answer.headers["location"]) == (303, "/login")
            assert (await removed.get(f"/items/{item_id}")).headers["location"] == "/login"
    async with httpx.AsyncClient(base_url=rollout.url, headers=bearer(BOB)) as api:
        assert (await api.get("/api/items")).status_code == 401
    found = await detail(inbox, item_id)
    assert (found["status"], found["decisions"]) == ("waiting", [])


async def test_a_session_ends_at_its_absolute_lifetime_however_often_it_is_used(
    rollout: Running,
) -> None:
    async with httpx.AsyncClient(base_url=rollout.url, timeout=10) as carol:
        started = time.monotonic()
        await log_in(carol, CAROL)
    used = 0
    # a client that keeps the cookie past its Max-Age: only the server can end the session
    async with holding(rollout.url, carol.cookies.get(COOKIE)) as kept:

        async def ended() -> bool:
            nonlocal used
            answer = await kept.get("/inbox")  # each use would renew a sliding session
            if answer.status_code == 200:
                used += 1
                return False
            return answer.headers.get("location") == "/login"

        await eventually(ended, timeout=LIFETIME + 10, interval=0.1, message="the session to end")
        assert time.monotonic() - started >= LIFETIME
        assert used >= 2
        assert (await kept.get("/inbox/version")).status_code == 401
    async with httpx.AsyncClient(base_url=rollout.url, timeout=10) as carol:
        await log_in(carol, CAROL)  # logging in again opens a new session


# -- throttling, origin, bodies ------------------------------------------------------------------


async def test_wrong_tokens_in_a_row_from_one_address_get_429(inbox: Running) -> None:
    wrong = f"guess-{uuid.uuid4().hex}"
    transport = httpx.AsyncHTTPTransport(local_address="127.0.0.7")
    async with httpx.AsyncClient(base_url=inbox.url, transport=transport, timeout=10) as attacker:
        for _ in range(BURST):
            answer = await attacker.get("/api/items", headers=bearer(wrong))
            assert answer.status_code == 401
        over = await attacker.get("/api/items", headers=bearer(wrong))
        assert over.status_code == 429
        assert int(over.headers["retry-after"]) >= 1
        assert "too many" in over.json()["error"]
        # the right token does not help from there, nor the login form
        assert (await attacker.get("/api/items", headers=bearer(ALICE))).status_code == 429
        login = await attacker.post("/login", data={"token": ALICE})
        assert login.status_code == 429 and int(login.headers["retry-after"]) >= 1
    async with httpx.AsyncClient(base_url=inbox.url, headers=bearer(ALICE)) as elsewhere:
        assert (await elsewhere.get("/api/items")).status_code == 200  # another address

    transport = httpx.AsyncHTTPTransport(local_address="127.0.0.8")
    async with httpx.AsyncClient(base_url=inbox.url, transport=transport, timeout=10) as guesser:
        for _ in range(BURST):
            assert (await guesser.post("/login", data={"token": wrong})).status_code == 401
        assert (await guesser.post("/login", data={"token": wrong})).status_code == 429

    await eventually(
        lambda: "web login refused from 127.0.0.8" in inbox.log.read_text(),
        message="the refusals logged with the client's address",
    )
    logged = inbox.log.read_text()
    assert "API token refused from 127.0.0.7" in logged
    assert wrong not in logged and ALICE not in logged


@pytest.fixture(scope="module")
def proxied(inbox_nats: NatsServer, var_dir: Path) -> Iterator[Running]:
    """An inbox behind a proxy at 127.0.0.9, as behind a Kubernetes Ingress controller."""
    yield from _started(
        inbox_nats,
        var_dir,
        "inbox_api-proxied",
        DESK_REVIEWERS=reviewers(("alice", "reviewer", ALICE)),
        DESK_AUTH_BURST=str(BURST),
        DESK_FORWARDED_ALLOW_IPS="127.0.0.9",
    )


async def test_behind_a_trusted_proxy_each_client_is_throttled_on_its_own(
    proxied: Running,
) -> None:
    """Every request comes from the proxy: throttling the proxy's address would let one guesser
    lock every reviewer out. Only the named proxy may say who the client is."""
    wrong = f"guess-{uuid.uuid4().hex}"
    proxy = httpx.AsyncHTTPTransport(local_address="127.0.0.9")
    async with httpx.AsyncClient(base_url=proxied.url, transport=proxy, timeout=10) as via:
        guesser = {"X-Forwarded-For": "203.0.113.7"}
        for _ in range(BURST):
            answer = await via.get("/api/items", headers={**guesser, **bearer(wrong)})
            assert answer.status_code == 401
        over = await via.get("/api/items", headers={**guesser, **bearer(wrong)})
        assert over.status_code == 429
        colleague = {"X-Forwarded-For": "203.0.113.8", **bearer(ALICE)}
        assert (await via.get("/api/items", headers=colleague)).status_code == 200
    # anyone else claiming to forward for someone is not believed
    direct = httpx.AsyncHTTPTransport(local_address="127.0.0.10")
    async with httpx.AsyncClient(base_url=proxied.url, transport=direct, timeout=10) as liar:
        for n in range(BURST):
            forged = {"X-Forwarded-For": f"198.51.100.{n}", **bearer(wrong)}
            assert (await liar.get("/api/items", headers=forged)).status_code == 401
        forged = {"X-Forwarded-For": "198.51.100.99", **bearer(wrong)}
        assert (await liar.get("/api/items", headers=forged)).status_code == 429
    await eventually(
        lambda: "API token refused from 203.0.113.7" in proxied.log.read_text(),
        message="the refusal logged with the client's address, not the proxy's",
    )


async def test_a_login_posted_from_another_site_is_refused(
    inbox: Running, alice: httpx.AsyncClient
) -> None:
    for headers in (
        {"Origin": "https://evil.example"},
        {"Origin": "null"},  # a sandboxed frame or a no-referrer page
        {"Origin": inbox.url.replace("127.0.0.1", "localhost")},
        {"Referer": "https://evil.example/free-prizes"},
        {"Origin": "http://127.0.0.1:notaport"},
    ):
        answer = await alice.post("/login", data={"token": ALICE}, headers=headers)
        assert answer.status_code == 403, headers
        assert "another site" in answer.text
        assert COOKIE not in answer.headers.get("set-cookie", "")
    assert (await alice.get("/inbox")).headers["location"] == "/login"

    own = await alice.post("/login", data={"token": ALICE}, headers={"Origin": inbox.url})
    assert own.status_code == 303
    csrf = csrf_of((await alice.get("/inbox")).text)
    cross = await alice.post(
        "/items/T1~v1/decide",
        data={"type": "accept", "version": "1", "csrf": csrf},
        headers={"Origin": "https://evil.example"},
    )
    assert cross.status_code == 403


async def test_a_2_mib_decision_gets_413_and_records_nothing(
    inbox: Running, alice: httpx.AsyncClient, nats_bus: Bus
) -> None:
    item_id = await waiting_item(inbox, nats_bus)
    huge = "x" * (2 * MIB)
    body = json.dumps({"type": "edit", "version": 1, "args": {"reply": huge}}).encode()

    async def streamed(data: bytes) -> AsyncIterator[bytes]:  # no Content-Length: chunked
        for start in range(0, len(data), 64 * 1024):
            yield data[start : start + 64 * 1024]

    url = f"/api/items/{item_id}/decision"
    async with httpx.AsyncClient(base_url=inbox.url, headers=bearer(ALICE), timeout=10) as api:
        declared = await api.post(url, content=body, headers={"Content-Type": "application/json"})
        assert declared.status_code == 413
        assert declared.json() == {"error": f"request body larger than {MIB} bytes"}
        chunked = await api.post(url, content=streamed(body))
        assert chunked.status_code == 413

    csrf = await log_in(alice, ALICE)
    form = f"csrf={csrf}&type=edit&version=1&reply={huge}".encode()
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    decide = f"/items/{item_id}/decide"
    page = await alice.post(decide, content=streamed(form), headers=headers)
    assert page.status_code == 413 and "text/html" in page.headers["content-type"]
    assert (await alice.post(decide, content=form, headers=headers)).status_code == 413

    found = await detail(inbox, item_id)
    assert (found["status"], found["decisions"]) == ("waiting", [])
    async with httpx.AsyncClient(base_url=inbox.url, headers=bearer(ALICE)) as api:
        small = await api.post(url, json={"type": "accept", "version": 1})
        assert small.status_code == 202  # the item was untouched, and a normal body works

    async def published() -> bool:
        return bool(await published_decisions(nats_bus, item_id=item_id))

    await eventually(published, message="the decision published")
    assert [d["type"] for d in await published_decisions(nats_bus, item_id=item_id)] == ["accept"]


# -- the pieces, with an injected clock ----------------------------------------------------------


def test_the_throttle_refills_at_its_rate_and_forgets_idle_addresses() -> None:
    now = [0.0]
    throttle = Throttle(rate=0.5, burst=2, clock=lambda: now[0], clients=2)
    assert throttle.retry_after("a") == 0
    assert throttle.failed("a") is False
    assert throttle.failed("a") is True  # the last attempt it had
    assert throttle.retry_after("a") == 2
    assert throttle.retry_after("b") == 0  # per address
    now[0] = 1.0
    assert throttle.retry_after("a") == 1
    now[0] = 2.0
    assert throttle.retry_after("a") == 0
    throttle.failed("b")
    now[0] = 100.0
    throttle.failed("c")
    throttle.failed("d")  # three remembered: the refilled ones are forgotten
    assert throttle.retry_after("d") == 0 and len(throttle._buckets) <= 2


async def test_a_body_is_refused_when_it_stops_arriving_or_outgrows_a_false_length() -> None:
    def client(*chunks: bytes, finished: bool = True) -> Callable[[], Awaitable[dict[str, Any]]]:
        last = len(chunks) - 1
        left = [
            {"type": "http.request", "body": c, "more_body": not (finished and i == last)}
            for i, c in enumerate(chunks)
        ]

        async def receive() -> dict[str, Any]:
            if left:
                return left.pop(0)
            await asyncio.Event().wait()  # then nothing more, ever
            raise AssertionError("unreachable")

        return receive

    assert await read_limited(client(b"a=1", b"&b=2"), None, MIB, timeout=1) == b"a=1&b=2"
    with pytest.raises(BodyRefused) as refused:
        await read_limited(client(b"a=1", finished=False), None, MIB, timeout=0.05)
    assert refused.value.status == 408
    with pytest.raises(BodyRefused) as refused:  # "²" is no length: counted as it streams
        await read_limited(client(b"x" * 8, b"x" * 8), "²", 10, timeout=1)
    assert refused.value.status == 413


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_a_stored_session_holds_only_a_hash_and_ends_at_its_lifetime(
    database: str, tmp_path: Path
) -> None:
    with fresh_schema() if database == "postgresql" else contextlib.nullcontext("") as schema:
        url = database_url(url_in(schema) if schema else None, tmp_path, "inbox")
        engine = make_engine(url)
        try:
            store.create_tables(engine)
            token = "a-token-for-the-store-test"
            configured = [ReviewerConfig(name="ann", role="reviewer", token_sha256=sha256(token))]
            start = dt.datetime(2025, 1, 1, 9, tzinfo=dt.UTC)
            now = [start]
            sessions = Sessions(engine, Reviewers(configured), 8 * 3600, clock=lambda: now[0])
            session_id = sessions.open(token)
            with engine.connect() as connection:
                rows = connection.execute(text("SELECT * FROM inbox_sessions")).all()
            assert len(rows) == 1 and session_id not in str(rows) and token not in str(rows)
            for minutes in range(0, 8 * 60, 30):  # used every half hour
                now[0] = start + dt.timedelta(minutes=minutes)
                found = sessions.find(session_id)
                assert found is not None and found.user == store.Reviewer("ann", "reviewer")
            now[0] = start + dt.timedelta(hours=8)
            assert sessions.find(session_id) is None
            assert sessions.find("x" * 10_000) is None and sessions.find("") is None
        finally:
            engine.dispose()
