"""Claims through the API, two reviewers on one real inbox_api (SQLite and PostgreSQL): a claim
names its holder to the other, who cannot decide without taking over; a take-over, a release,
a decision and an expiry end claims, and the item's trail holds every one of them."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from desk.natsserver import NatsServer
from shared.bus import Bus
from shared.streams import Topology, provision
from tests import forkserver
from tests.helpers import eventually
from tests.inbox_items import draft_item, publish_item

from .conftest import Api, own_nats, running_api
from .test_api import decisions

ANA, BEN = "ana-token-for-tests", "ben-token-for-tests"
CLAIM_SECONDS = 2.0  # short, so that a test can watch a claim run out


def reviewers() -> str:
    return json.dumps(
        [
            {
                "name": name,
                "role": "reviewer",
                "token_sha256": hashlib.sha256(t.encode()).hexdigest(),
            }
            for name, t in (("ana", ANA), ("ben", BEN))
        ]
    )


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def team_api(
    request: pytest.FixtureRequest, inbox_nats: NatsServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Api]:
    with running_api(
        request.param,
        inbox_nats,
        tmp_path_factory.mktemp(f"claims-{request.param}"),
        DESK_REVIEWERS=reviewers(),
        DESK_CLAIM_SECONDS=str(CLAIM_SECONDS),
    ) as running:
        yield running


async def detail(api: Api, item_id: str, token: str = ANA) -> dict[str, Any]:
    async with api.client(token) as client:
        found: dict[str, Any] = (await client.get(f"/api/items/{item_id}")).json()
    return found


async def new_item(api: Api, bus: Bus, token: str = ANA) -> str:
    item = draft_item(f"T{uuid.uuid4().hex[:8]}")
    await publish_item(bus, item)

    async def projected() -> bool:
        return (await detail(api, item.id, token)).get("status") == "waiting"

    await eventually(projected, timeout=15, message=f"{item.id} projected")
    return item.id


async def test_a_claimed_item_is_decided_by_another_only_by_taking_it_over(
    team_api: Api, nats_bus: Bus
) -> None:
    item = await new_item(team_api, nats_bus)
    async with team_api.client(ANA) as ana, team_api.client(BEN) as ben:
        claimed = await ana.post(f"/api/items/{item}/claim")
        assert claimed.status_code == 200, claimed.text
        assert claimed.json()["reviewer"] == "ana"
        listed = (await ben.get("/api/items")).json()["items"]
        assert [i["claimed_by"] for i in listed if i["id"] == item] == ["ana"]

        refused = await ben.post(f"/api/items/{item}/claim")
        assert refused.status_code == 409
        assert refused.json()["claimed_by"] == "ana"
        assert refused.json()["error"].startswith("ana is working on this until ")
        blocked = await ben.post(f"/api/items/{item}/decision", json={"type": "accept"})
        assert blocked.status_code == 409 and blocked.json()["claimed_by"] == "ana"
        assert await decisions(nats_bus, item.split("~")[0]) == []

        taken = await ben.post(
            f"/api/items/{item}/decision", json={"type": "accept", "take_over": True}
        )
        assert taken.status_code == 202, taken.text
        assert taken.json()["reviewer"] == "ben"
    shown = await detail(team_api, item)
    assert shown["claim"] is None  # the decision ended it
    trail = [(c["action"], c["reviewer"], c["previous"]) for c in shown["claims"]]
    assert trail == [
        ("claimed", "ana", None),
        ("taken over", "ben", "ana"),
        ("decided", "ben", None),
    ]
    [decision] = await decisions(nats_bus, item.split("~")[0])
    assert decision["reviewer"] == "ben"


async def test_the_holder_renews_and_releases_and_a_claim_runs_out(
    team_api: Api, nats_bus: Bus
) -> None:
    item = await new_item(team_api, nats_bus)
    async with team_api.client(ANA) as ana, team_api.client(BEN) as ben:
        first = (await ana.post(f"/api/items/{item}/claim")).json()
        renewed = (await ana.post(f"/api/items/{item}/claim")).json()
        assert renewed["since"] == first["since"] and renewed["until"] > first["until"]
        assert (await ben.delete(f"/api/items/{item}/claim")).json() == {"released": False}
        assert (await ana.delete(f"/api/items/{item}/claim")).json() == {"released": True}
        assert (await ben.post(f"/api/items/{item}/claim")).status_code == 200  # free again

        async def ran_out() -> bool:  # ben walked away: his claim holds nobody after a while
            return (await detail(team_api, item))["claim"] is None

        await eventually(ran_out, timeout=CLAIM_SECONDS + 5, message="the claim ran out")
        again = await ana.post(f"/api/items/{item}/claim")
        assert again.status_code == 200 and again.json()["reviewer"] == "ana"
        took = await ben.post(f"/api/items/{item}/claim", json={"take_over": True})
        assert took.status_code == 200 and took.json()["reviewer"] == "ben"
        assert (await ben.post(f"/api/items/{item}/claim", content=b"{nope")).status_code == 400
        assert (
            await ben.post(f"/api/items/{item}/claim", json={"take_over": "maybe"})
        ).status_code == 422
        assert (await ben.post("/api/items/nope~v1/claim")).status_code == 404
    trail = [(c["action"], c["reviewer"]) for c in (await detail(team_api, item))["claims"]]
    assert trail == [
        ("claimed", "ana"),
        ("released", "ana"),
        ("claimed", "ben"),
        ("expired", "ben"),
        ("claimed", "ana"),
        ("taken over", "ben"),
    ]


async def test_two_first_claims_at_once_give_the_item_to_one_reviewer(
    team_api: Api, nats_bus: Bus
) -> None:
    item = await new_item(team_api, nats_bus)
    async with team_api.client(ANA) as ana, team_api.client(BEN) as ben:
        answers = await asyncio.gather(
            *(c.post(f"/api/items/{item}/claim") for c in (ana, ben, ana, ben))
        )
    codes = sorted(a.status_code for a in answers)
    holders = {a.json()["reviewer"] for a in answers if a.status_code == 200}
    assert len(holders) == 1 and codes == [200, 200, 409, 409], (codes, holders)


async def test_a_decided_item_cannot_be_claimed(team_api: Api, nats_bus: Bus) -> None:
    item = await new_item(team_api, nats_bus)
    async with team_api.client(ANA) as ana:
        assert (await ana.post(f"/api/items/{item}/decision", json={"type": "ignore"})).is_success
        refused = await ana.post(f"/api/items/{item}/claim")
    assert refused.status_code == 409
    assert "nothing to claim" in refused.json()["error"]


def desk_inbox(api: Api, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DESK_")}
    return forkserver.run(["inbox", *args, "--url", api.url, "--token", token], env=env)


@pytest.fixture(scope="module")
def patient_nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    """A broker of its own: two inbox processes on one broker would share its items."""
    with own_nats(tmp_path_factory.mktemp("claims-cli-nats")) as server:
        yield server


@pytest.fixture(scope="module")
def patient_api(
    patient_nats: NatsServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Api]:
    """Claims of the default five minutes: a command line's steps never outlast one."""
    with running_api(
        "sqlite", patient_nats, tmp_path_factory.mktemp("claims-cli"), DESK_REVIEWERS=reviewers()
    ) as running:
        yield running


async def test_claims_from_the_command_line(patient_api: Api, patient_nats: NatsServer) -> None:
    team_api = patient_api
    bus = await Bus.connect(patient_nats.url, service="test")
    try:
        await provision(bus.js, Topology())
        item = await new_item(team_api, bus)
    finally:
        await bus.close()
    mine = desk_inbox(team_api, ANA, "claim", item)
    assert mine.returncode == 0 and mine.stdout.startswith(f"{item} is yours until "), mine
    refused = desk_inbox(team_api, BEN, "accept", item)
    assert refused.returncode == 1
    assert refused.stderr.startswith("desk inbox accept: 409 ana is working on this until ")
    assert "Traceback" not in refused.stderr
    listed = desk_inbox(team_api, BEN, "list")
    assert next(line for line in listed.stdout.splitlines() if line.startswith(item)).split()[
        2:4
    ] == [
        "waiting",
        "(ana)",
    ]
    shown = desk_inbox(team_api, BEN, "show", item)
    assert "claimed:  by ana until " in shown.stdout
    assert desk_inbox(team_api, BEN, "release", item).stdout.strip() == f"{item} was not yours"
    taken = desk_inbox(team_api, BEN, "ignore", item, "--take-over")
    assert taken.returncode == 0 and taken.stdout.strip() == f"ignored {item}", taken
    trail = desk_inbox(team_api, ANA, "show", item).stdout.split("claims:\n")[1].splitlines()
    assert [line.split("UTC  ")[1] for line in trail] == [
        "claimed by ana",
        "taken over by ben from ana",
        "decided by ben",
    ]
