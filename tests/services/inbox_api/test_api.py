"""The inbox JSON API against a real inbox_api process, on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import uuid
from typing import Any

import httpx
from prometheus_client import CONTENT_TYPE_LATEST

from shared import subjects
from shared.bus import Bus
from shared.envelope import Envelope
from tests.helpers import eventually, messages
from tests.inbox_items import (
    REFUND_CITATION,
    conversation,
    draft_item,
    notify_item,
    publish_item,
)

from .conftest import VIEWER, Api


def new_thread() -> str:
    return f"T{uuid.uuid4().hex[:8]}"


async def stored(api: Api, item_id: str) -> dict[str, Any] | None:
    async with api.client() as client:
        answer = await client.get(f"/api/items/{item_id}")
    return answer.json() if answer.status_code == 200 else None


async def waiting(api: Api, bus: Bus, *items: Any) -> None:
    for item in items:
        await publish_item(bus, item)
    for item in items:
        await eventually(
            lambda i=item: stored(api, i.id), timeout=15, message=f"{item.id} projected"
        )


async def decisions(bus: Bus, thread: str) -> list[dict[str, Any]]:
    found = []
    for m in await messages(bus.js, subjects.INBOX):
        if m.subject == subjects.INBOX_DECISION:
            data = Envelope.model_validate_json(m.data).data
            if data["thread"] == thread:
                found.append({**data, "msg_id": m.headers["Nats-Msg-Id"]})
    return found


async def test_accept_publishes_one_decision_with_the_reviewer_from_the_token(
    api: Api, nats_bus: Bus
) -> None:
    thread = new_thread()
    await waiting(api, nats_bus, draft_item(thread))
    async with api.client() as client:
        answer = await client.post(
            f"/api/items/{thread}~v1/decision",
            json={"type": "accept", "version": 1, "reviewer": "someone else"},
        )
    assert answer.status_code == 422  # the client cannot name the reviewer
    async with api.client() as client:
        answer = await client.post(
            f"/api/items/{thread}~v1/decision", json={"type": "accept", "version": 1}
        )
    assert answer.status_code == 202, answer.text
    assert answer.json()["reviewer"] == "reviewer"
    [published] = await decisions(nats_bus, thread)
    assert published["msg_id"] == f"decision:{thread}:r1:v1"
    assert (published["type"], published["reviewer"], published["version"]) == (
        "accept",
        "reviewer",
        1,
    )
    detail = await stored(api, f"{thread}~v1")
    assert detail is not None and detail["status"] == "sending"
    assert detail["decisions"][0]["final_text"] == detail["action_request"]["args"]["reply"]


async def test_status_codes(api: Api, nats_bus: Bus) -> None:
    thread, notify = new_thread(), new_thread()
    await waiting(api, nats_bus, draft_item(thread), notify_item(notify))
    url = f"/api/items/{thread}~v1/decision"
    async with api.client(token=None) as anonymous:
        assert (await anonymous.get("/api/items")).status_code == 401
        assert (await anonymous.post(url, json={"type": "accept", "version": 1})).status_code == 401
    async with api.client(token="not-a-token") as stranger:
        assert (await stranger.get("/api/items")).status_code == 401
    async with api.client(token=VIEWER) as viewer:
        assert (await viewer.get("/api/items")).status_code == 200
        assert (await viewer.post(url, json={"type": "accept", "version": 1})).status_code == 403
    async with api.client() as client:
        assert (await client.get("/api/items/nope~v1")).status_code == 404
        assert (
            await client.post("/api/items/nope~v1/decision", json={"type": "accept", "version": 1})
        ).status_code == 404
        assert (await client.post(url, content=b"{not json")).status_code == 400
        assert (await client.post(url, json={"type": "maybe", "version": 1})).status_code == 422
        assert (await client.post(url, json={"type": "accept", "version": 0})).status_code == 422
        assert (
            await client.post(url, json={"type": "edit", "version": 1, "args": {"reply": "  "}})
        ).status_code == 422
        assert (
            await client.post(url, json={"type": "response", "version": 1, "args": ""})
        ).status_code == 422
        assert (await client.post(url, json={"type": "accept", "version": 2})).status_code == 409
        notify_url = f"/api/items/{notify}~v1/decision"
        assert (
            await client.post(notify_url, json={"type": "accept", "version": 1})
        ).status_code == 422
        elsewhere = {"action": "send_reply", "args": {"ticket_id": thread, "reply": "x"}}
        assert (  # an escalation is taken only as a reply on its own ticket
            await client.post(notify_url, json={"type": "edit", "version": 1, "args": elsewhere})
        ).status_code == 422
        assert (
            await client.post(notify_url, json={"type": "ignore", "version": 1})
        ).status_code == 202
        assert (await client.post(url, json={"type": "ignore", "version": 1})).status_code == 202
        again = await client.post(url, json={"type": "accept", "version": 1})
        assert again.status_code == 409
        assert "ignored" in again.json()["error"]
        assert (await client.get("/api/items?status=bogus")).status_code == 422
        assert (await client.get("/api/items?limit=0")).status_code == 422
        assert (await client.get("/api/items?cursor=zzz")).status_code == 422
    assert len(await decisions(nats_bus, thread)) == 1


async def test_concurrent_decisions_on_one_item_publish_exactly_one(
    api: Api, nats_bus: Bus
) -> None:
    thread = new_thread()
    await waiting(api, nats_bus, draft_item(thread))
    async with api.client() as client:
        answers = await asyncio.gather(
            *(
                client.post(
                    f"/api/items/{thread}~v1/decision",
                    json={
                        "type": kind,
                        "version": 1,
                        "args": "Be brief" if kind == "response" else None,
                    },
                )
                for kind in ["accept", "ignore", "response"] * 5
            )
        )
    taken = {a.json()["type"] for a in answers if a.status_code == 202}
    assert len(taken) == 1, taken  # one kind won; its repeats are answered with it
    [kind] = taken
    codes = [a.status_code for a in answers]
    wanted = [202 if k == kind else 409 for k in ["accept", "ignore", "response"] * 5]
    assert codes == wanted
    assert len(await decisions(nats_bus, thread)) == 1


async def test_a_decision_posted_again_after_a_lost_answer_is_answered_with_the_recorded_one(
    api: Api, nats_bus: Bus
) -> None:
    """A client that lost the answer to its decision (the connection dropped, the inbox was
    restarted) and posts it again learns that it was taken: 202, not "this item is sending".
    Anything else on the decided version is still refused, and nothing is decided twice."""
    thread = new_thread()
    await waiting(api, nats_bus, draft_item(thread))
    url = f"/api/items/{thread}~v1/decision"
    edit = {"type": "edit", "version": 1, "args": {"reply": "Your refund is on its way."}}
    async with api.client() as client:
        first = await client.post(url, json=edit)
        assert first.status_code == 202
        await eventually(lambda: decisions(nats_bus, thread), message="the decision published")
        again = await client.post(url, json={**edit, "args": "  Your refund is on its way.\n"})
        assert again.status_code == 202, again.text
        assert again.json() == {**first.json(), "published": True}
        other_text = await client.post(url, json={**edit, "args": "Something else."})
        assert other_text.status_code == 409
        assert "not waiting" in other_text.json()["error"]
        accept = await client.post(url, json={"type": "accept", "version": 1})
        assert accept.status_code == 409
    [decision] = await decisions(nats_bus, thread)
    assert decision["args"]["args"]["reply"] == "Your refund is on its way."
    async with api.client() as client:
        trail = (await client.get(f"/api/items/{thread}~v1")).json()
    assert trail["status"] == "sending"


async def test_a_langchain_client_decides_without_a_version(api: Api, nats_bus: Bus) -> None:
    """LangChain's clients send a HumanResponse without the version: the version the item id
    names is meant, and one a redraft superseded is still refused."""
    thread, redrafted = new_thread(), new_thread()
    await waiting(api, nats_bus, draft_item(thread), draft_item(redrafted, 1))
    await waiting(api, nats_bus, draft_item(redrafted, 2, feedback=["shorter"]))
    async with api.client() as client:
        approved = await client.post(f"/api/items/{thread}~v1/decision", json={"type": "approve"})
        assert approved.status_code == 202, approved.text
        stale = await client.post(f"/api/items/{redrafted}~v1/decision", json={"type": "approve"})
        assert stale.status_code == 409
        assert "superseded by v2" in stale.json()["error"]
        responded = await client.post(
            f"/api/items/{redrafted}~v2/decision", json={"type": "respond", "message": "Warmer."}
        )
        assert responded.status_code == 202, responded.text
    [decision] = await decisions(nats_bus, thread)
    assert (decision["type"], decision["version"]) == ("accept", 1)
    [feedback] = await decisions(nats_bus, redrafted)
    assert (feedback["type"], feedback["version"], feedback["args"]) == ("response", 2, "Warmer.")


async def test_a_decision_on_a_version_a_redraft_superseded_gets_409(
    api: Api, nats_bus: Bus
) -> None:
    thread = new_thread()
    await waiting(api, nats_bus, draft_item(thread, 1))
    await waiting(api, nats_bus, draft_item(thread, 2, feedback=["shorter"]))
    async with api.client() as client:
        stale = await client.post(
            f"/api/items/{thread}~v1/decision", json={"type": "accept", "version": 1}
        )
        assert stale.status_code == 409
        assert "superseded by v2" in stale.json()["error"]
        detail = (await client.get(f"/api/items/{thread}~v2")).json()
    assert [v["status"] for v in detail["versions"]] == ["superseded", "waiting"]
    assert detail["versions"][1]["feedback"] == ["shorter"]


async def test_an_accept_the_redraft_overtook_ends_superseded_not_sending(
    api: Api, nats_bus: Bus
) -> None:
    """Accepted a moment before v2 of the same round arrived: drafter and sender refuse a
    decision on an older version of a round, so no result would ever end v1. A sending item of
    an earlier round is the sender's to end, and stays as it is."""
    thread, other = new_thread(), new_thread()
    await waiting(api, nats_bus, draft_item(thread, 1), draft_item(other, 1, round_id="r1"))
    async with api.client() as client:
        for item_id in (f"{thread}~v1", f"{other}~v1"):
            answer = await client.post(
                f"/api/items/{item_id}/decision", json={"type": "accept", "version": 1}
            )
            assert answer.status_code == 202, answer.text
    await waiting(
        api, nats_bus, draft_item(thread, 2), draft_item(other, 2, round_id="r2")
    )  # a redraft of round r1; the next round of the other ticket

    async def settled() -> bool:
        v1 = await stored(api, f"{thread}~v1")
        return v1 is not None and v1["status"] == "superseded"

    await eventually(settled, timeout=15, message="the overtaken accept superseded")
    earlier_round = await stored(api, f"{other}~v1")
    assert earlier_round is not None and earlier_round["status"] == "sending"


async def test_an_older_version_arriving_late_changes_nothing(api: Api, nats_bus: Bus) -> None:
    thread = new_thread()
    await waiting(api, nats_bus, draft_item(thread, 2))
    await waiting(api, nats_bus, draft_item(thread, 1))
    v2, v1 = await stored(api, f"{thread}~v2"), await stored(api, f"{thread}~v1")
    assert v2 is not None and v2["status"] == "waiting"
    assert v1 is not None and v1["status"] == "superseded"


async def test_langchain_vocabulary_is_understood(api: Api, nats_bus: Bus) -> None:
    a, b, c, d = (new_thread() for _ in range(4))
    await waiting(api, nats_bus, draft_item(a), draft_item(b), draft_item(c), draft_item(d))
    async with api.client() as client:
        for thread, body in [
            (a, {"type": "approve", "version": 1}),
            (b, {"type": "reject", "version": 1, "message": "not now"}),
            (c, {"type": "respond", "version": 1, "message": "Mention the tracking number"}),
            (
                d,
                {
                    "type": "edit",
                    "version": 1,
                    "edited_action": {
                        "name": "send_reply",
                        "args": {"reply": "Edited reply text."},
                    },
                },
            ),
        ]:
            answer = await client.post(f"/api/items/{thread}~v1/decision", json=body)
            assert answer.status_code == 202, answer.text
    assert (await decisions(nats_bus, a))[0]["type"] == "accept"
    assert (await decisions(nats_bus, b))[0]["type"] == "ignore"
    responded = (await decisions(nats_bus, c))[0]
    assert (responded["type"], responded["args"]) == ("response", "Mention the tracking number")
    edited = (await decisions(nats_bus, d))[0]
    assert edited["type"] == "edit"
    assert edited["args"]["args"]["reply"] == "Edited reply text."
    assert edited["args"]["args"]["ticket_id"] == d  # the rest of the action request is kept


async def test_filters_sorting_pagination_stats_and_the_review_log(api: Api, nats_bus: Bus) -> None:
    base = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    marker = uuid.uuid4().hex[:6]
    threads = [f"P{marker}{i}" for i in range(5)]
    await waiting(
        api,
        nats_bus,
        *(
            draft_item(
                t, created_at=base + dt.timedelta(minutes=i), category="bug" if i % 2 else "invoice"
            )
            for i, t in enumerate(threads)
        ),
    )
    async with api.client() as client:
        seen: list[str] = []
        cursor = None
        while True:
            params: dict[str, Any] = {"text": marker.lower(), "limit": 2}
            if cursor:
                params["cursor"] = cursor
            page = (await client.get("/api/items", params=params)).json()
            seen += [i["thread"] for i in page["items"]]
            cursor = page["next_cursor"]
            if not cursor:
                break
        assert seen == threads  # oldest first, every item once
        newest = (await client.get("/api/items", params={"text": marker, "sort": "newest"})).json()
        assert [i["thread"] for i in newest["items"]] == threads[::-1]
        bugs = (await client.get("/api/items", params={"text": marker, "category": "bug"})).json()
        assert [i["thread"] for i in bugs["items"]] == [threads[1], threads[3]]
        await client.post(
            f"/api/items/{threads[0]}~v1/decision",
            json={"type": "edit", "version": 1, "args": "A better reply for you."},
        )
        stats = (await client.get("/api/stats")).json()
        assert stats["by_status"]["waiting"] >= 4
        assert stats["oldest_waiting"]["age_seconds"] > 0
        assert stats["decision_mix"]["invoice"]["edit"] >= 1
        assert stats["dead_letters"] == 0 or isinstance(stats["dead_letters"], int)
        log = (await client.get("/api/review-log")).text.splitlines()
    entries = [json.loads(line) for line in log]
    [mine] = [e for e in entries if e["thread"] == threads[0]]
    assert mine["type"] == "edit" and mine["reviewer"] == "reviewer"
    assert mine["final_text"] == "A better reply for you."
    assert mine["model_draft"].startswith("Hi Jane")


async def test_dead_letters_can_be_listed_and_replayed(api: Api, nats_bus: Bus) -> None:
    junk = f"junk-{uuid.uuid4()}"
    await nats_bus.publish(subjects.INBOX_ITEM, b"\x00 not an item", msg_id=junk)

    async def listed() -> list[dict[str, Any]]:
        async with api.client() as client:
            letters = (await client.get("/api/deadletters")).json()["dead_letters"]
        return [d for d in letters if d["original_msg_id"] == junk]

    await eventually(listed, timeout=15, message="the dead letter")
    [letter] = await listed()
    assert letter["reason"] == "undecodable"
    async with api.client(token=VIEWER) as viewer:
        assert (await viewer.post(f"/api/deadletters/{letter['id']}/replay")).status_code == 403
    async with api.client() as client:
        assert (await client.post("/api/deadletters/999999/replay")).status_code == 404
        replayed = await client.post(f"/api/deadletters/{letter['id']}/replay")
        assert replayed.status_code == 202, replayed.text


async def test_the_openapi_document_validates(api: Api) -> None:
    from openapi_spec_validator import validate

    document = httpx.get(f"{api.url}/openapi.json").json()
    validate(document)
    assert "/api/items/{id}/decision" in document["paths"]
    # assembled from the route table: every route of the API, each operation named once
    from services.inbox_api.api import routes

    served = {
        (route.path, method.lower())
        for route in routes
        if route.path.startswith("/api/")  # type: ignore[attr-defined]
        for method in route.methods or ()  # type: ignore[attr-defined]
        if method != "HEAD"
    }
    documented = {(path, method) for path, ops in document["paths"].items() for method in ops}
    assert documented == served
    ids = [op["operationId"] for ops in document["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids)) == len(served)
    assert {"post_claim", "delete_claim"} <= set(ids)


def answered_as_documented(document: dict[str, Any], path: str, answer: httpx.Response) -> None:
    """`answer`'s body is what the document says the operation answers with its status."""
    from jsonschema import Draft202012Validator

    operation = document["paths"][path][answer.request.method.lower()]
    documented = operation["responses"][str(answer.status_code)]
    schema = documented["content"]["application/json"]["schema"]
    # the document as the root, so the components' references resolve
    validator = Draft202012Validator({**document, **schema})
    problems = [
        f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(answer.json())
    ]
    assert problems == [], (answer.request.method, path, answer.status_code, problems)


async def test_every_answer_is_what_the_document_says(api: Api, nats_bus: Bus) -> None:
    """The document's response schemas come from the response models: real answers, each
    operation's, with every field filled in that an item can have, are held to them."""
    document = httpx.get(f"{api.url}/openapi.json").json()
    thread = new_thread()
    item = draft_item(
        thread,
        feedback=["shorter"],
        priority="urgent",
        queue="billing",
        conversation=conversation(thread, ("customer", "Where is my refund?")),
        citations=[REFUND_CITATION],
    )
    await waiting(api, nats_bus, item, notify_item(new_thread()))
    items = "/api/items/{id}"
    async with api.client() as client:
        for path, answer in [
            ("/api/items", await client.get("/api/items")),
            (items, await client.get(f"/api/items/{item.id}")),
            (items, await client.get("/api/items/nothing~v1")),
            (f"{items}/claim", await client.post(f"/api/items/{item.id}/claim")),
            (f"{items}/claim", await client.delete(f"/api/items/{item.id}/claim")),
            (
                f"{items}/decision",
                await client.post(f"/api/items/{item.id}/decision", json={"type": "accept"}),
            ),
            (
                f"{items}/decision",
                await client.post(f"/api/items/{item.id}/decision", json={"type": "edit"}),
            ),
            ("/api/stats", await client.get("/api/stats")),
            (
                "/api/instructions",
                await client.post(
                    "/api/instructions", json={"category": "refund", "text": "Say sorry."}
                ),
            ),
            ("/api/instructions", await client.get("/api/instructions")),
            (
                "/api/instructions/{id}",
                await client.patch("/api/instructions/1", json={"text": "x"}),
            ),
            ("/api/instructions/{id}", await client.delete("/api/instructions/1")),
            ("/api/instructions/{id}", await client.delete("/api/instructions/99")),
        ]:
            assert answer.status_code < 500, answer.text
            answered_as_documented(document, path, answer)
    # the item's detail carried what the models name
    async with api.client() as client:
        detail = (await client.get(f"/api/items/{item.id}")).json()
    assert detail["citations"][0]["article"] == REFUND_CITATION.article
    assert detail["queue"] == "billing" and detail["conversation"]


async def test_the_public_port_answers_no_health_or_metrics_only_the_ops_port_does(
    api: Api,
) -> None:
    """Reviewers reach the inbox's port (DESK_HTTP_PORT); health and metrics (the waiting
    count, the review log's pace) are on the ops port only, with or without a token."""
    ops = api.process.ops_url
    for token in (None, VIEWER):
        async with api.client(token) as client:
            for path in ("/metrics", "/healthz", "/readyz"):
                public = await client.get(path)
                assert public.status_code == 404, (token, path, public.text)
                assert "desk_" not in public.text, path
    for path in ("/metrics", "/healthz", "/readyz"):
        assert httpx.get(f"{ops}{path}").status_code == 200, path
    metrics = httpx.get(f"{ops}/metrics")
    assert metrics.headers["content-type"] == CONTENT_TYPE_LATEST  # Prometheus' text format
    assert "# TYPE desk_inbox_waiting_items gauge" in metrics.text
    assert httpx.get(f"{ops}/api/items").status_code == 404, "no inbox on the ops port"
