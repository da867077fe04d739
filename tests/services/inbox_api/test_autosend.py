"""Evidence-based auto-send against a real inbox_api process and nats-server, on SQLite and on
PostgreSQL: it cannot be enabled without the evidence (or by a non-admin); once enabled, an item
of the category is decided by the policy and published as an `auto` accept; audits that find
edits demote the category, and every step is in the trail."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlmodel import Session

from desk.evaluation import DEMO_CASES
from desk.natsserver import NatsServer
from services.inbox_api import store
from services.inbox_api.store.tables import AutoSendRow, now
from shared import ids, subjects
from shared.bus import Bus
from shared.db import make_engine
from shared.envelope import Envelope
from shared.inbox import AUTO_SEND, WRITE_CONFIG, item_id
from shared.results import REPLY_SENT, REPLY_WITHDRAWN, SOURCE_SENDER, event_id
from shared.streams import Topology, provision
from tests.helpers import eventually, messages
from tests.inbox_items import draft_item, published_decisions, routed

from .conftest import REVIEWER, VIEWER, Api, running_api
from .test_api import stored, waiting
from .test_web import log_in


def eval_report(*categories: str, right: bool = True) -> dict[str, Any]:
    """A `desk eval --json` report, shaped as the command writes it, whose cases (one per
    category) were drafted in the right category (`right`) or in `other`."""
    return {
        "cases_file": {"name": "demo", "version": 3, "sha256": "ab" * 32},
        "model": "offline (built-in)",
        "passed": True,
        "cases": [
            {
                "id": f"{c}-case",
                "category": c,
                "drafted_category": c if right else "other",
                "criteria": 1,
                "criteria_met": 1,
                "missing": [],
                "said": [],
                "articles": [],
                "cited": [],
                "quoted": [],
                "error": None,
                "ok": right,
            }
            for c in categories
        ],
    }


PASSED = eval_report("refund", "billing")


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def policy_api(
    request: pytest.FixtureRequest, inbox_nats: NatsServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Api]:
    with running_api(
        request.param,
        inbox_nats,
        tmp_path_factory.mktemp(f"autosend-{request.param}"),
        DESK_ADMINS='["reviewer"]',
        DESK_AUTOSEND_EVIDENCE="3",  # the last 3 decisions (200 by default)
        DESK_AUTOSEND_AUDIT="1",  # every auto-sent reply is audited
        DESK_AUTOSEND_DEMOTE="0.3",
    ) as running:
        yield running


async def handled(bus: Bus) -> bool:
    """The inbox has handled every item it was sent (its auto-send step included)."""
    info = await bus.js.consumer_info(subjects.INBOX, "inbox_api")
    return info.num_pending == 0 and info.num_ack_pending == 0


def ticket() -> str:
    return f"T{uuid.uuid4().hex[:8]}"


async def decide(api: Api, bus: Bus, kind: str, category: str = "refund") -> None:
    item = draft_item(ticket(), category=category)
    await waiting(api, bus, item)
    async with api.client() as client:
        body: dict[str, Any] = {"type": kind, "version": 1}
        if kind == "edit":
            body["args"] = "Hi, edited."
        answer = await client.post(f"/api/items/{item.id}/decision", json=body)
        assert answer.status_code == 202, answer.text


async def turn(api: Api, on: bool, report: Any = None, token: str | None = None) -> Any:
    async with api.client(token) if token else api.client() as client:
        return await client.post("/api/autosend/refund", json={"enabled": on, "eval": report})


async def test_auto_send_needs_evidence_sends_as_auto_and_demotes_itself(
    policy_api: Api, nats_bus: Bus
) -> None:
    api = policy_api
    refused = await turn(api, True, PASSED)
    assert refused.status_code == 422
    assert "the last 0 decisions (of 3 needed)" in refused.json()["error"]
    assert (await turn(api, True, PASSED, token=VIEWER)).status_code == 403

    for kind in ("accept", "edit", "accept"):  # 2 of 3 unedited: not enough
        await decide(api, nats_bus, kind)
    refused = await turn(api, True, PASSED)
    assert refused.status_code == 422 and "66.7% unedited accepts" in refused.json()["error"]
    for _ in range(3):
        await decide(api, nats_bus, "accept")
    refused = await turn(api, True, {**PASSED, "passed": False})
    assert refused.status_code == 422 and "did not pass" in refused.json()["error"]
    assert (await turn(api, True, None)).status_code == 422  # no eval at all

    enabled = await turn(api, True, PASSED)
    assert enabled.status_code == 200, enabled.text
    assert enabled.json()["evidence"]["unedited_share"] == 1.0
    assert enabled.json()["by"] == "reviewer"

    # an item of the category is sent by the policy: an accept marked auto, by AUTO_SEND
    item = await routed(nats_bus, draft_item(ticket(), category="refund"))
    other = draft_item(ticket(), category="billing")  # auto-send is per category
    warned = (await routed(nats_bus, draft_item(ticket(), category="refund"))).model_copy(
        update={"warnings": ["check"]}
    )
    await waiting(api, nats_bus, item, other, warned)
    await eventually(
        lambda: published_decisions(nats_bus, thread=item.thread), message="the auto decision"
    )
    [decision] = await published_decisions(nats_bus, thread=item.thread)
    assert (decision["type"], decision["reviewer"], decision["auto"]) == ("accept", AUTO_SEND, True)
    shown = await stored(api, item.id)
    assert shown is not None and (shown["status"], shown["auto"], shown["audit"]) == (
        "sending",
        True,
        "waiting",
    )
    await eventually(lambda: handled(nats_bus), message="every item handled")
    for left in (other, warned):  # a reviewer's turn
        assert (await stored(api, left.id) or {})["status"] == "waiting"
        assert await published_decisions(nats_bus, thread=left.thread) == []

    # the audit finds it needed editing: the category is demoted at once
    async with api.client(VIEWER) as viewer:
        assert (
            await viewer.post(f"/api/items/{item.id}/audit", json={"verdict": "fine"})
        ).status_code == 403
    async with api.client() as client:
        bad = await client.post(f"/api/items/{item.id}/audit", json={"verdict": "meh"})
        assert bad.status_code == 422
        audited = await client.post(
            f"/api/items/{item.id}/audit",
            json={"verdict": "edited", "note": "It should name the 5-day processing time."},
        )
        assert audited.status_code == 200, audited.text
        assert audited.json()["demoted"]["action"] == "demoted"
        again = await client.post(f"/api/items/{item.id}/audit", json={"verdict": "fine"})
        assert again.status_code == 409
        overview = (await client.get("/api/autosend")).json()
    assert overview["categories"]["refund"]["enabled"] is False
    assert [t["action"] for t in overview["trail"]] == ["enabled", "demoted"]
    assert overview["trail"][1]["evidence"]["edited"] == 1
    assert overview["trail"][1]["by"] == AUTO_SEND

    after = await routed(nats_bus, draft_item(ticket(), category="refund"))  # demoted
    await waiting(api, nats_bus, after)
    await eventually(lambda: handled(nats_bus), message="the item handled")
    assert (await stored(api, after.id) or {})["status"] == "waiting"
    assert await published_decisions(nats_bus, thread=after.thread) == []

    async with api.client() as client:  # off, by hand: 409 when already off
        assert (
            await client.post("/api/autosend/refund", json={"enabled": False})
        ).status_code == 409
        assert (await client.post("/api/autosend/nope", json={"enabled": True})).status_code == 404


async def test_the_page_shows_the_policy_and_a_reviewer_audits_an_auto_sent_reply(
    policy_api: Api, nats_bus: Bus
) -> None:
    """After the first test the refund category is demoted; turn it on again with fresh
    evidence, let it send one, and audit that one from its page."""
    api = policy_api
    for _ in range(3):
        await decide(api, nats_bus, "accept")
    assert (await turn(api, True, PASSED)).status_code == 200
    item = await routed(nats_bus, draft_item(ticket(), category="refund"))
    await waiting(api, nats_bus, item)
    await eventually(lambda: handled(nats_bus), message="the item handled")
    async with httpx.AsyncClient(base_url=api.url, timeout=10) as browser:
        csrf = await log_in(browser, REVIEWER)
        shown = (await browser.get(f"/items/{item.id}")).text
        assert "Sent by auto-send" in shown and "It needed editing" in shown
        overview = (await browser.get("/autosend")).text
        assert item.id in overview and "demoted</strong> by auto-send" in overview
        done = await browser.post(
            f"/items/{item.id}/audit", data={"csrf": csrf, "verdict": "fine", "note": ""}
        )
        assert (done.status_code, done.headers["location"]) == (303, "/autosend")
        after = (await browser.get(f"/items/{item.id}")).text
        assert "Audited by reviewer: fine" in after and "It needed editing" not in after
        page = (await browser.get("/autosend")).text
        assert "Audit recorded for" in page and "is off" not in page  # the old edit is history
        again = await browser.post(
            f"/items/{item.id}/audit", data={"csrf": csrf, "verdict": "fine"}
        )
        assert again.status_code == 409
    async with api.client() as client:
        assert (await client.get("/api/autosend")).json()["categories"]["refund"]["enabled"]


async def test_a_change_made_by_another_replica_reaches_the_projection_within_its_ttl(
    tmp_path: Path,
) -> None:
    """Two inbox replicas on one database: what one turns on, the other's projection tries
    within `ON_FOR_TTL` seconds; what this replica changes, it sees at once."""
    url = f"sqlite:///{tmp_path / 'inbox.sqlite'}"
    here, there = make_engine(url), make_engine(url)
    store.create_tables(here)
    assert store.autosend.on_for(here) == store.autosend.on_for(there) == frozenset()
    with Session(there) as session:  # the other replica's admin turned refund on
        session.add(AutoSendRow(category="refund", action="enabled", at=now(), by="admin"))
        session.commit()
    await eventually(
        lambda: store.autosend.on_for(here) == {"refund"},
        timeout=store.autosend.ON_FOR_TTL + 5,
        message="the other replica's change seen",
    )
    store.autosend.change(here, "refund", False, "admin", store.autosend.Policy())
    assert store.autosend.on_for(here) == frozenset()  # its own change: at once
    here.dispose()
    there.dispose()


def test_auto_send_never_sends_an_item_without_a_draft(tmp_path: Path) -> None:
    """An item the model wrote no reply for (`no_draft`, or an empty reply) is not auto-sent,
    however its category stands: a person writes its reply."""
    engine = make_engine(f"sqlite:///{tmp_path / 'inbox.sqlite'}")
    store.create_tables(engine)
    with Session(engine) as session:
        session.add(AutoSendRow(category="refund", action="enabled", at=now(), by="admin"))
        session.commit()
    failed = draft_item(ticket(), reply="").model_copy(
        update={"no_draft": "the model's answers stayed unusable", "config": WRITE_CONFIG}
    )
    empty = draft_item(ticket(), reply="")  # a draft's config, and nothing to send
    written = draft_item(ticket())
    for item in (failed, empty, written):
        store.project(engine, item)

    def auto_send(item: Any) -> Any:
        return store.decide(
            engine,
            item.id,
            "accept",
            None,
            1,
            store.Reviewer(AUTO_SEND, "reviewer"),
            auto=store.autosend.applies(store.autosend.Policy()),
        )

    for item in (failed, empty):
        with pytest.raises(store.Conflict, match="auto-send does not apply"):
            auto_send(item)
        assert store.get_item(engine, item.id)["status"] == "waiting"  # type: ignore[index]
    sent = auto_send(written)
    assert sent.auto and sent.type == "accept"
    engine.dispose()


async def test_an_eval_report_is_checked_by_its_case_results_not_believed(
    policy_api: Api, nats_bus: Bus, tmp_path: Path
) -> None:
    """An admin with the decisions' evidence for invoice sends reports: a hand-made
    `"passed": true`, one whose cases do not pass, one whose case contradicts itself; each is
    refused. The report of a real `desk eval --json` run is accepted, with its case file's
    sha256 in the trail."""
    api = policy_api
    for _ in range(3):
        await decide(api, nats_bus, "accept", category="invoice")

    async def enable(report: Any) -> httpx.Response:
        async with api.client() as client:
            return await client.post(
                "/api/autosend/invoice", json={"enabled": True, "eval": report}
            )

    hand_made = {"passed": True, "by_category": {"invoice": {"cases": 7}}, "overall": {"cases": 44}}
    refused = await enable(hand_made)
    assert refused.status_code == 422, refused.text
    assert "with its case results" in refused.json()["error"]
    refused = await enable(eval_report("invoice", "billing", right=False))  # says passed: true
    assert refused.status_code == 422 and "case results do not pass" in refused.json()["error"]
    contradicting = eval_report("invoice")
    contradicting["cases"][0]["missing"] = ["5 business days"]  # yet every criterion met
    refused = await enable(contradicting)
    assert refused.status_code == 422 and "does not agree" in refused.json()["error"]
    refused = await enable(eval_report("billing"))
    assert refused.status_code == 422 and "no invoice cases" in refused.json()["error"]
    async with api.client() as client:
        assert not (await client.get("/api/autosend")).json()["categories"]["invoice"]["enabled"]

    written = tmp_path / "eval.json"
    run = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "desk", "eval", "--json", str(written)],
        env={k: v for k, v in os.environ.items() if not k.startswith(("DESK_", "LLM_"))}
        | {"DESK_VAR_DIR": str(tmp_path / "var")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    enabled = await enable(json.loads(written.read_text()))
    assert enabled.status_code == 200, enabled.text
    shown = enabled.json()["evidence"]["eval"]
    assert shown["cases_file"]["sha256"] == hashlib.sha256(DEMO_CASES.read_bytes()).hexdigest()
    assert shown["overall"]["errors"] == 0 and shown["category"]["cases"] >= 1
    async with api.client() as client:  # tidy: off again
        off = await client.post("/api/autosend/invoice", json={"enabled": False})
        assert off.status_code == 200, off.text


def test_which_auto_sent_replies_are_audited_depends_on_the_deployments_secret() -> None:
    """Whoever knows an item id cannot tell whether its auto-sent reply will be audited: the
    sample is keyed (the same for one key, every time), not the id's bare sha256."""
    ids = [item_id(f"T{n}", 1) for n in range(1000)]

    def sample(key: bytes) -> set[str]:
        return {i for i in ids if store.autosend.sampled(i, 0.1, key)}

    one, other = sample(b"one-deployment-secret"), sample(b"another-deployment-secret")
    assert one == sample(b"one-deployment-secret")  # a redelivery picks the same
    assert one != other
    assert 50 < len(one) < 150 and 50 < len(other) < 150  # about a tenth
    guessed = {  # what anyone could compute from the id alone
        i
        for i in ids
        if int.from_bytes(hashlib.sha256(i.encode()).digest()[:4], "big") < 0.1 * 2**32
    }
    assert len(one & guessed) < len(one) / 2


def test_a_deployment_without_an_audit_key_does_not_start(monkeypatch: pytest.MonkeyPatch) -> None:
    from shared.settings import InboxApiSettings

    reviewers = '[{"name": "ana", "role": "reviewer", "token_sha256": "' + "0" * 64 + '"}]'
    monkeypatch.setenv("DESK_REVIEWERS", reviewers)
    with pytest.raises(ValueError, match="DESK_AUDIT_KEY is required with DESK_REVIEWERS"):
        InboxApiSettings()
    monkeypatch.setenv("DESK_AUDIT_KEY", "too-short")
    with pytest.raises(ValueError, match="DESK_AUDIT_KEY must be at least 16 characters"):
        InboxApiSettings()
    monkeypatch.setenv("DESK_AUDIT_KEY", "x" * 32)
    assert InboxApiSettings().audit_key is not None


async def publish_result(bus: Bus, kind: str, item: Any, key: str, **data: Any) -> None:
    """The sender's result for `item`'s reply (outbox `key`)."""
    envelope = Envelope(
        id=event_id(kind, key),
        source=SOURCE_SENDER,
        type=kind,
        data={"item_id": item.id, "outbox_key": key, "thread": item.thread, **data},
    )
    await bus.publish(subjects.result(kind), envelope.to_bytes(), msg_id=envelope.id)


async def told(bus: Bus) -> dict[str, dict[str, Any]]:
    """The audits the inbox told the drafter (`inbox.audited`), by message id."""
    return {
        m.headers["Nats-Msg-Id"]: Envelope.model_validate_json(m.data or b"{}").data
        for m in await messages(bus.js, subjects.INBOX)
        if m.subject == subjects.INBOX_AUDITED and m.headers
    }


async def test_an_audit_of_a_sent_reply_is_told_to_the_drafter(
    policy_api: Api, nats_bus: Bus
) -> None:
    """A person's audit of an auto-sent reply is published on `inbox.audited` (the drafter
    keeps a reply found fine as an example) once the reply went out: one audited while it is
    still being sent is told when the sender reports it sent, one whose reply was withdrawn
    is never told."""
    api = policy_api
    async with api.client() as client:
        on = (await client.get("/api/autosend")).json()["categories"]["refund"]["enabled"]
    if not on:
        for _ in range(3):
            await decide(api, nats_bus, "accept")
        assert (await turn(api, True, PASSED)).status_code == 200
    sent = await routed(nats_bus, draft_item(ticket(), category="refund"))
    withdrawn = await routed(nats_bus, draft_item(ticket(), category="refund"))
    await waiting(api, nats_bus, sent, withdrawn)
    await eventually(lambda: handled(nats_bus), message="both auto-sent")
    assert [(await stored(api, i.id) or {}).get("auto") for i in (sent, withdrawn)] == [True] * 2

    key = f"{withdrawn.thread}/{withdrawn.round}/send_reply"
    await publish_result(nats_bus, REPLY_WITHDRAWN, withdrawn, key, reason="the ticket was closed")

    async def status(item_id: str, wanted: str) -> bool:
        return (await stored(api, item_id) or {}).get("status") == wanted

    await eventually(lambda: status(withdrawn.id, "withdrawn"), message="withdrawn")
    async with api.client() as client:
        for item in (withdrawn, sent):  # the sent one is still being sent
            audited = await client.post(f"/api/items/{item.id}/audit", json={"verdict": "fine"})
            assert audited.status_code == 200, audited.text
    mine = {ids.audited(i.thread, i.round, i.version) for i in (sent, withdrawn)}
    assert mine.isdisjoint(await told(nats_bus))  # neither went out (yet)

    await publish_result(nats_bus, REPLY_SENT, sent, f"{sent.thread}/{sent.round}/send_reply")
    wanted = ids.audited(sent.thread, sent.round, sent.version)

    async def is_told() -> bool:
        return wanted in await told(nats_bus)

    await eventually(is_told, timeout=20, message="the audit told")
    notice = (await told(nats_bus))[wanted]
    assert {k: v for k, v in notice.items() if k != "at"} == {
        "item_id": sent.id,
        "thread": sent.thread,
        "round": sent.round,
        "version": sent.version,
        "verdict": "fine",
    }
    # the pass that told it found the withdrawn reply's audit too, and left it untold
    assert mine & set(await told(nats_bus)) == {wanted}


async def test_an_audit_recorded_while_the_broker_is_away_is_told_when_it_is_back(
    tmp_path: Path,
) -> None:
    """The audit is recorded with its item before it is published: one made while the broker
    is away is published by the relay once it is back, not lost."""
    nats = NatsServer(tmp_path / "nats", sync_always=False)
    nats.start()
    bus = await Bus.connect(nats.url, service="test")
    try:
        await provision(bus.js, Topology())
        with running_api(
            "sqlite",
            nats,
            tmp_path / "inbox",
            DESK_ADMINS='["reviewer"]',
            DESK_AUTOSEND_EVIDENCE="3",
            DESK_AUTOSEND_AUDIT="1",
            DESK_RELAY_INTERVAL="0.5",
        ) as api:
            for _ in range(3):
                await decide(api, bus, "accept")
            assert (await turn(api, True, PASSED)).status_code == 200
            item = await routed(bus, draft_item(ticket(), category="refund"))
            await waiting(api, bus, item)
            await eventually(lambda: handled(bus), message="auto-sent")
            key = f"{item.thread}/{item.round}/send_reply"
            await publish_result(bus, REPLY_SENT, item, key)

            async def sent() -> bool:
                return (await stored(api, item.id) or {}).get("status") == "sent"

            await eventually(sent, message="sent")

            nats.stop()
            async with api.client() as client:
                audited = await client.post(f"/api/items/{item.id}/audit", json={"verdict": "fine"})
                assert audited.status_code == 200, audited.text
            nats.restart()
            wanted = ids.audited(item.thread, item.round, item.version)

            async def is_told() -> bool:
                return bus.connected and wanted in await told(bus)

            await eventually(is_told, timeout=30, message="the audit told after the outage")
    finally:
        await bus.close()
        nats.kill()
