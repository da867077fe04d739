"""The reviewer's web page against a real inbox_api process and a real nats-server: sessions,
CSRF, roles, what an item shows (the conversation, the customer, the ticket, what changed), the
list's flags, filters and order, the edit preview, deciding, and one run in a headless Chromium."""

from __future__ import annotations

import contextlib
import datetime as dt
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from desk.natsserver import NatsServer
from services.inbox_api.render import age, changes, diff, fold
from shared import deadletters, outage, subjects
from shared.bus import Bus
from shared.envelope import Envelope
from shared.inbox import WRITE_CONFIG, Citation, InboxItem, Overdue
from shared.results import (
    NOTIFY_FAILED,
    NOTIFY_SENT,
    REPLY_FAILED,
    REPLY_SENT,
    SOURCE_SENDER,
    event_id,
)
from tests.helpers import eventually
from tests.inbox_items import (
    REFUND_CITATION,
    conversation,
    draft_item,
    notify_item,
    publish_item,
    publish_withdrawal,
    published_decisions,
)
from tests.services_running import ServiceProcess

from .conftest import REVIEWER, VIEWER, write_credentials

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
NOW = dt.datetime.now(dt.UTC)
TICKET_URL = "https://helpdesk.example.com/tickets/{ticket}"


@pytest.fixture(scope="module")
def web(inbox_nats: NatsServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("inbox-web")
    write_credentials(root / "var")
    env = {
        "DESK_NATS_URL": inbox_nats.url,
        "DESK_VAR_DIR": str(root / "var"),
        "DESK_HELPDESK_TICKET_URL": TICKET_URL,
        "DESK_ADMINS": '["reviewer"]',  # the reviewer token's name: it sees the dead letters
    }
    process = ServiceProcess(["inbox_api"], env, root / "inbox_api.log").start()
    try:
        yield process.url
    finally:
        process.stop()


@pytest.fixture
async def browser_client(web: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=web, timeout=10) as client:
        yield client


def after_decision(location: str, decided: str) -> bool:
    """A decision's redirect: the next waiting item (another one), or the inbox when none is."""
    if location == "/inbox":
        return True
    return (
        location.startswith("/items/")
        and location.endswith("?after=decision")
        and decided not in location
    )


def new_thread() -> str:
    return f"T{uuid.uuid4().hex[:8]}"


async def waiting(web: str, bus: Bus, *items: InboxItem) -> None:
    """Publish items as the drafter does and wait until the inbox lists them."""
    for item in items:
        await publish_item(bus, item)
    async with httpx.AsyncClient(
        base_url=web, headers={"Authorization": f"Bearer {REVIEWER}"}
    ) as c:
        for item in items:

            async def listed(i: InboxItem = item) -> bool:
                return (await c.get(f"/api/items/{i.id}")).status_code == 200

            await eventually(listed, timeout=15, message=f"{item.id} in the inbox")


async def log_in(client: httpx.AsyncClient, token: str) -> str:
    """Log the client in; the CSRF token of its session."""
    answer = await client.post("/login", data={"token": token})
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == "/inbox"
    page = await client.get("/inbox")
    assert page.status_code == 200
    return csrf_of(page.text)


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "no CSRF token on the page"
    return found.group(1)


async def published(bus: Bus, thread: str) -> bool:
    return bool(await published_decisions(bus, thread=thread))


async def publish(bus: Bus, subject: str, kind: str, msg_id: str, data: dict[str, Any]) -> None:
    """An event as another service publishes it (a withdrawal, an overdue mark, a result)."""
    envelope = Envelope(id=msg_id, source=SOURCE_SENDER, type=kind, data=data)
    await bus.publish(subject, envelope.to_bytes(), msg_id=msg_id)


async def page_until(client: httpx.AsyncClient, path: str, text: str) -> str:
    """The page at `path` once it shows `text` (the inbox projects events asynchronously)."""
    found = ""

    async def shows() -> bool:
        nonlocal found
        found = (await client.get(path)).text
        return text in found

    await eventually(shows, timeout=15, message=f"{text!r} on {path}")
    return found


def messages_on(html: str) -> list[tuple[str, bool, str]]:
    """(author kind, answered by this draft, message id) of each message, in page order."""
    found = re.findall(r'<article class="msg (\w+)( answered)?" id="m-([^"]+)"', html)
    return [(kind, bool(mark), ident) for kind, mark, ident in found]


# -- pure helpers ------------------------------------------------------------------------------


def test_age_reads_like_a_person_says_it() -> None:
    assert age(NOW - dt.timedelta(seconds=20), NOW) == "< 1 min"
    assert age(NOW - dt.timedelta(minutes=3, seconds=30), NOW) == "3 min"
    assert age(NOW - dt.timedelta(hours=2, minutes=59), NOW) == "2 h"
    assert age(NOW - dt.timedelta(days=3, hours=1), NOW) == "3 d"
    assert age(NOW + dt.timedelta(seconds=5), NOW) == "< 1 min"  # clock skew is not negative


def test_diff_marks_insertions_and_deletions_word_by_word() -> None:
    before = "Hi Jane,\n\nWe are on it.\n\nBest regards"
    after = "Hi Jane,\n\nWe fixed it today.\n\nBest regards"
    segments = diff(before, after)
    assert "".join(t for op, t in segments if op != "insert") == before
    assert "".join(t for op, t in segments if op != "delete") == after
    assert ("delete", "are on") in segments
    assert ("insert", "fixed") in segments
    assert ("insert", " today") in segments
    assert diff("same", "same") == [("equal", "same")]
    assert diff("", "new text") == [("insert", "new text")]


def test_changes_show_the_changed_lines_with_context_and_gaps() -> None:
    before = "Hi Jane,\n\nThanks for writing.\nWe are on it.\nMore soon.\n\nBest regards,\nSam"
    after = "Hi Jane,\n\nThanks for writing.\nWe fixed it today.\nMore soon.\n\nBest regards,\nSam"
    lines = changes(before, after, context=1)
    kinds = [kind for kind, _ in lines]
    assert kinds == ["gap", "same", "removed", "added", "same", "gap"]
    assert lines[1] == ("same", [("equal", "Thanks for writing.")])
    assert lines[2] == ("removed", [("equal", "We "), ("delete", "are on"), ("equal", " it.")])
    added = [("equal", "We "), ("insert", "fixed"), ("equal", " it"), ("insert", " today")]
    assert lines[3] == ("added", [*added, ("equal", ".")])
    assert [k for k, _ in changes(before, after)][:3] == ["same", "same", "same"]  # context 2
    assert changes(before, before) == []
    grown = changes("Hi Jane,", "Hi Jane,\nOne more line.")
    assert grown == [("same", [("equal", "Hi Jane,")]), ("added", [("insert", "One more line.")])]
    assert changes("Old text.", "New words.") == [
        ("removed", [("delete", "Old text"), ("equal", ".")]),
        ("added", [("insert", "New words"), ("equal", ".")]),
    ]


def test_fold_keeps_the_last_four_and_everything_the_draft_answers_open() -> None:
    said = [{"id": f"m{n}"} for n in range(1, 8)]
    earlier, recent = fold(said, ["m7"])
    assert [m["id"] for m in earlier] == ["m1", "m2", "m3"]
    assert [(m["id"], m["answered"]) for m in recent] == [
        ("m4", False),
        ("m5", False),
        ("m6", False),
        ("m7", True),
    ]
    earlier, recent = fold(said, ["m2", "m3"])  # the customer wrote several times since
    assert [m["id"] for m in earlier] == ["m1"]
    assert [m["id"] for m in recent][:2] == ["m2", "m3"]
    assert fold(said[:4], []) == ([], [{**m, "answered": False} for m in said[:4]])


# -- sessions, CSRF and roles ------------------------------------------------------------------


async def test_pages_need_a_login_and_a_wrong_token_gets_401(
    browser_client: httpx.AsyncClient,
) -> None:
    c = browser_client
    for path in ("/", "/inbox", "/items/T1~v1"):
        answer = await c.get(path)
        assert (answer.status_code, answer.headers["location"]) == (303, "/login"), path
    assert (await c.get("/inbox/version")).status_code == 401
    refused = await c.post("/items/T1~v1/decide", data={"type": "accept", "version": "1"})
    assert refused.status_code == 401

    wrong = await c.post("/login", data={"token": "not-a-token"})
    assert wrong.status_code == 401
    assert "That token is not valid." in wrong.text
    assert "session" not in wrong.headers.get("set-cookie", "")
    assert (await c.post("/login", data={})).status_code == 401

    answer = await c.post("/login", data={"token": REVIEWER})
    cookie = answer.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie
    assert (await c.get("/")).headers["location"] == "/inbox"
    page = await c.get("/inbox")
    assert page.status_code == 200
    assert "reviewer" in page.text
    assert "nonce-" in page.headers["content-security-policy"]
    assert (await c.get("/inbox/version")).json()["version"]

    out = await c.post("/logout", data={"csrf": csrf_of(page.text)})
    assert (out.status_code, out.headers["location"]) == (303, "/login")
    assert (await c.get("/inbox")).headers["location"] == "/login"


async def test_a_post_without_the_session_csrf_token_is_403(
    web: str, browser_client: httpx.AsyncClient, nats_bus: Bus
) -> None:
    item = draft_item(new_thread())
    await waiting(web, nats_bus, item)
    csrf = await log_in(browser_client, REVIEWER)
    for form in (
        {"type": "accept", "version": "1"},
        {"type": "accept", "version": "1", "csrf": "forged"},
        {"type": "accept", "version": "1", "csrf": csrf + "x"},
        {"type": "accept", "version": "1", "csrf": "ünïcode"},
    ):
        answer = await browser_client.post(f"/items/{item.id}/decide", data=form)
        assert answer.status_code == 403, form
    preview = await browser_client.post(f"/items/{item.id}/edit", data={"reply": "x"})
    assert preview.status_code == 403
    assert (await browser_client.post("/logout")).status_code == 403
    assert await published_decisions(nats_bus, thread=item.thread) == []

    page = await browser_client.get(f"/items/{item.id}")
    assert "waiting" in page.text  # nothing was decided


async def test_a_viewer_sees_no_forms_and_may_not_post(
    web: str, browser_client: httpx.AsyncClient, nats_bus: Bus
) -> None:
    item = draft_item(new_thread())
    await waiting(web, nats_bus, item)
    csrf = await log_in(browser_client, VIEWER)
    page = await browser_client.get(f"/items/{item.id}")
    assert page.status_code == 200
    assert item.action_request.args["reply"].split("\n")[0] in page.text
    assert "/decide" not in page.text and "/edit" not in page.text
    assert "<textarea" not in page.text
    assert "read this inbox but not decide" in page.text
    for path, form in (
        ("decide", {"type": "accept", "version": "1", "csrf": csrf}),
        ("edit", {"reply": "Hello", "version": "1", "csrf": csrf}),
    ):
        answer = await browser_client.post(f"/items/{item.id}/{path}", data=form)
        assert answer.status_code == 403
    assert await published_decisions(nats_bus, thread=item.thread) == []


async def test_the_detail_shows_only_the_forms_the_item_allows(
    web: str, browser_client: httpx.AsyncClient, nats_bus: Bus
) -> None:
    draft, notify = draft_item(new_thread()), notify_item(new_thread())
    await waiting(web, nats_bus, draft, notify)
    await log_in(browser_client, REVIEWER)
    page = (await browser_client.get(f"/items/{draft.id}")).text
    for form in ('id="accept"', 'id="edit-link"', 'id="respond"', 'id="ignore"'):
        assert form in page
    assert 'id="edit"' not in page and '<textarea id="reply"' not in page
    assert page.count('name="version" value="1"') == 3
    # the Edit button opens the page with the draft in the edit form (no script needed)
    editing = (await browser_client.get(f"/items/{draft.id}?edit=1")).text
    assert 'id="edit"' in editing and 'id="draft"' not in editing
    assert 'id="accept"' not in editing  # accepting now would send the unedited draft
    page = (await browser_client.get(f"/items/{notify.id}")).text
    assert 'id="ignore"' in page and 'id="take"' in page  # an escalation: take it, or ignore
    assert 'id="accept"' not in page and 'id="edit' not in page and 'id="respond"' not in page
    assert "lawyer" in page and 'id="write"' not in page  # the editor opens once it is taken
    assert 'id="edit"' not in (await browser_client.get(f"/items/{notify.id}?edit=1")).text


def no_draft_item(thread: str) -> InboxItem:
    """What the drafter publishes when the model failed on a ticket: no reply, WRITE_CONFIG."""
    item = draft_item(thread, reply="")
    return item.model_copy(
        update={
            "no_draft": "the model's answers stayed unusable after a redraft",
            "config": WRITE_CONFIG,
        }
    )


async def test_an_item_without_a_draft_asks_for_the_reply_and_cannot_be_accepted(
    web: str, browser_client: httpx.AsyncClient, nats_bus: Bus
) -> None:
    item = no_draft_item(new_thread())
    await waiting(web, nats_bus, item)
    csrf = await log_in(browser_client, REVIEWER)
    page = (await browser_client.get(f"/items/{item.id}")).text
    assert "No draft: the model failed — write the reply yourself" in page
    assert "the model&#39;s answers stayed unusable after a redraft" in page
    for shown in ('id="write"', 'id="respond"', 'id="ignore"'):
        assert shown in page
    assert 'id="accept"' not in page and 'id="draft"' not in page and 'id="take"' not in page
    listed = (await browser_client.get("/inbox")).text
    assert (
        "no draft: write the reply" in listed.split(f'data-item="{item.id}"')[1].split("</tr>")[0]
    )
    async with httpx.AsyncClient(
        base_url=web, headers={"Authorization": f"Bearer {REVIEWER}"}
    ) as api:
        refused = await api.post(f"/api/items/{item.id}/decision", json={"type": "accept"})
        assert refused.status_code == 422 and "accept" in refused.json()["error"]
        listed = (await api.get(f"/api/items/{item.id}")).json()
        assert listed["no_draft"] == item.no_draft and listed["status"] == "waiting"
    written = "Hi Jane,\n\nYour refund went out today.\n\nThe Support Team"
    form = {"csrf": csrf, "type": "edit", "version": "1", "reply": written}
    answer = await browser_client.post(f"/items/{item.id}/decide", data=form)
    assert answer.status_code == 303, answer.text[-300:]
    await eventually(lambda: published(nats_bus, item.thread), message="the decision published")
    [decision] = await published_decisions(nats_bus, thread=item.thread)
    assert (decision["type"], decision["args"]["args"]["reply"]) == ("edit", written)


async def test_a_banner_says_drafts_are_delayed_while_the_model_is_down(
    web: str, browser_client: httpx.AsyncClient, nats_bus: Bus
) -> None:
    writer = outage.Writer(nats_bus.js, "drafter-test")
    since = dt.datetime(2026, 12, 7, 9, 30, tzinfo=dt.UTC)
    down = outage.ModelState(
        up=False, since=since, reason="HTTP 500 from the model", at=dt.datetime.now(dt.UTC)
    )
    item = draft_item(new_thread())
    await waiting(web, nats_bus, item)
    await log_in(browser_client, REVIEWER)
    banner = (
        "Drafts are delayed: the model has not answered since 2026-12-07 09:30 UTC "
        "(HTTP 500 from the model). Tickets wait and are drafted when it answers."
    )
    assert banner not in (await browser_client.get("/inbox")).text
    await writer.write(down)
    try:
        await page_until(browser_client, "/inbox", banner)
        assert banner in (await browser_client.get(f"/items/{item.id}")).text
        async with httpx.AsyncClient(
            base_url=web, headers={"Authorization": f"Bearer {REVIEWER}"}
        ) as api:
            model = (await api.get("/api/items")).json()["model"]
        assert model == {
            "up": False,
            "since": since.isoformat(),
            "reason": "HTTP 500 from the model",
        }
    finally:
        await writer.write(down.model_copy(update={"up": True, "at": dt.datetime.now(dt.UTC)}))

    async def gone() -> bool:
        return banner not in (await browser_client.get("/inbox")).text

    await eventually(gone, timeout=15, message="the banner gone once the model answers")


# -- what an item shows ------------------------------------------------------------------------


async def test_the_knowledge_a_draft_relies_on_is_shown_beside_it(
    web: str, browser_client: httpx.AsyncClient, nats_bus: Bus
) -> None:
    cited = [
        REFUND_CITATION,
        Citation(
            article="tricks",
            title="<b>Not markup</b>",
            passage="A passage",
            url="javascript:alert(1)",
        ),
    ]
    item = draft_item(new_thread(), citations=cited)
    await waiting(web, nats_bus, item)
    await log_in(browser_client, REVIEWER)
    page = (await browser_client.get(f"/items/{item.id}")).text
    sources = page.split('id="sources"', 1)[1].split("</aside>", 1)[0]
    assert "Knowledge this draft relies on" in sources
    assert (
        '<a href="https://help.example.com/refunds" rel="noopener noreferrer" target="_blank">'
        "Refunds and how long they take</a> · How long a refund takes" in sources
    )
    assert "processed within 5 business days" in sources
    assert "javascript:" not in page and "&lt;b&gt;Not markup&lt;/b&gt;" in sources
    async with httpx.AsyncClient(
        base_url=web, headers={"Authorization": f"Bearer {REVIEWER}"}
    ) as api:
        shown = (await api.get(f"/api/items/{item.id}")).json()
    assert [c["article"] for c in shown["citations"]] == ["refunds", "tricks"]
    plain = draft_item(new_thread())
    await waiting(web, nats_bus, plain)
    assert 'id="sources"' not in (await browser_client.get(f"/items/{plain.id}")).text


async def test_the_item_shows_the_customer_the_ticket_and_the_conversation_once(
    web: str, browser_client: httpx.AsyncClient, nats_bus: Bus
) -> None:
    thread = new_thread()
    said = conversation(
        thread,
        ("customer", "I was charged twice for order 881."),
        ("agent", "Sorry! I asked billing to refund one of the charges."),
        ("note", "Billing: refunded on Monday. <b>internal</b>"),
        ("customer", "Thanks, but the refund has not arrived."),
    )
    reply = "Hi Jane,\n\nThe refund was issued on Monday; banks take 5 days.\n\nBest regards"
    item = draft_item(
        thread, reply=reply, round_id=said[-1].id, conversation=said, priority="urgent"
    )
    await waiting(web, nats_bus, item)
    await log_in(browser_client, REVIEWER)
    page = (await browser_client.get(f"/items/{item.id}")).text

    assert "<strong>Jane Doe</strong> &lt;jane.doe@example.com&gt;" in page
    link = TICKET_URL.replace("{ticket}", thread)
    assert f'<a href="{link}" id="ticket-link"' in page
    assert '<span class="flag prio-urgent" id="priority">⚑ urgent</span>' in page
    assert 'Ticket status</span> <span class="value">open</span>' in page
    assert messages_on(page) == [
        ("customer", False, said[0].id),
        ("agent", False, said[1].id),
        ("note", False, said[2].id),
        ("customer", True, said[3].id),  # the round's message, highlighted
    ]
    for m in said:
        assert m.body.replace("<b>", "&lt;b&gt;").replace("</b>", "&lt;/b&gt;") in page
    assert "<b>internal</b>" not in page  # escaped
    assert "2026-11-30 09:10 UTC" in page  # the first message's time
    assert page.count("this draft answers") == 1
    assert f'href="#m-{said[3].id}"' in page  # the draft says what it answers
    assert "Show all" not in page  # four messages: nothing folded
    assert page.count(reply) == 1  # the draft once, above the buttons
    assert page.index('id="draft"') < page.index('id="accept"') < page.index('id="conversation"')
    editing = (await browser_client.get(f"/items/{item.id}?edit=1")).text
    assert editing.count(reply) == 1  # now inside the edit form instead
    assert editing.index('<textarea id="reply"') < editing.index(reply)


async def test_a_long_conversation_folds_all_but_the_last_four_behind_show_all(
    web: str, browser_client: httpx.AsyncClient, nats_bus: Bus
) -> None:
    thread = new_thread()
    said = conversation(
        thread, *((("customer", "agent")[n % 2], f"message number {n + 1}.") for n in range(7))
    )
    item = draft_item(thread, round_id=said[-1].id, conversation=said)
    await waiting(web, nats_bus, item)
    await log_in(browser_client, REVIEWER)
    page = (await browser_client.get(f"/items/{item.id}")).text
    assert "Show all 7 messages (3 earlier)" in page
    conversation_part = page[page.index('<section class="conversation"') :]
    folded, _, shown = conversation_part.partition("</details>")
    assert [ident for _, _, ident in messages_on(folded)] == [m.id for m in said[:3]]
    assert [ident for _, _, ident in messages_on(shown)] == [m.id for m in said[3:]]
    assert [answered for _, answered, _ in messages_on(page)] == [False] * 6 + [True]


async def test_a_later_version_says_why_and_what_changed(
    web: str, browser_client: httpx.AsyncClient, nats_bus: Bus
) -> None:
    thread = new_thread()
    said = conversation(thread, ("customer", "Where is my refund?"))
    first = "Hi Jane,\n\nWe are looking into it.\n\nBest regards"
    second = "Hi Jane,\n\nWe are sending your refund today.\n\nBest regards"
    v1 = draft_item(thread, reply=first, round_id=said[0].id, conversation=said)
    v2 = draft_item(
        thread,
        2,
        reply=second,
        round_id=said[0].id,
        conversation=said,
        cause="reviewer feedback",
        feedback=["Say when it was issued."],
    )
    followup = draft_item(new_thread(), cause="follow-up: the ticket waits on the customer")
    followup = followup.model_copy(
        update={"round": "followup-2026-12-01", "round_kind": "followup"}
    )
    await waiting(web, nats_bus, v1, v2, followup)
    await log_in(browser_client, REVIEWER)
    page = (await browser_client.get(f"/items/{v2.id}")).text
    assert "What changed since v1" in page
    assert "v2 · reviewer feedback" in page
    assert "Say when it was issued." in page
    lines = page[page.index('id="linediff"') :]
    assert '<div class="ln removed">We are <del>looking into it</del>.</div>' in lines
    assert '<div class="ln added">We are <ins>sending your refund today</ins>.</div>' in lines
    assert '<div class="ln same">Hi Jane,</div>' in lines
    assert page.count(second) == 1  # the diff shows lines, never the whole reply again
    old = (await browser_client.get(f"/items/{v1.id}")).text
    assert 'class="badge status-superseded" id="status"' in old
    assert "A newer draft exists" in old
    assert "What changed" not in old
    page = (await browser_client.get(f"/items/{followup.id}")).text
    assert "Follow-up draft" in page and '<span class="badge followup">follow-up</span>' in page


async def test_withdrawn_sending_sent_and_failed_each_look_like_themselves(
    web: str, browser_client: httpx.AsyncClient, nats_bus: Bus
) -> None:
    withdrawn, sent, failed = (draft_item(new_thread()) for _ in range(3))
    await waiting(web, nats_bus, withdrawn, sent, failed)
    csrf = await log_in(browser_client, REVIEWER)
    c = browser_client
    reason = "a person answered in the helpdesk"
    await publish_withdrawal(nats_bus, withdrawn, reason)
    page = await page_until(c, f"/items/{withdrawn.id}", 'class="badge status-withdrawn"')
    assert f"<strong>Withdrawn:</strong> {reason}." in page
    assert 'id="accept"' not in page and 'id="decide"' not in page
    refused = await c.post(
        f"/items/{withdrawn.id}/decide", data={"type": "accept", "version": "1", "csrf": csrf}
    )
    assert refused.status_code == 409 and reason in refused.text

    for item in (sent, failed):
        answer = await c.post(
            f"/items/{item.id}/decide", data={"type": "accept", "version": "1", "csrf": csrf}
        )
        assert answer.status_code == 303
    page = (await c.get(f"/items/{sent.id}")).text
    assert 'class="badge status-sending"' in page and 'class="badge status-sent"' not in page
    assert "the sender is delivering it. Not sent yet." in page
    assert "the draft above, unchanged" in page  # the decision does not repeat the draft
    assert page.count(sent.action_request.args["reply"]) == 1
    listed = (await c.get("/inbox?status=sending")).text
    assert sent.id in listed and 'class="badge status-sending"' in listed

    key = f"{sent.thread}/r1/send_reply"
    await publish(
        nats_bus,
        subjects.result(REPLY_SENT),
        REPLY_SENT,
        event_id(REPLY_SENT, key),
        {"item_id": sent.id, "outbox_key": key, "channel": "webhook"},
    )
    key = f"{failed.thread}/r1/send_reply"
    await publish(
        nats_bus,
        subjects.result(REPLY_FAILED),
        REPLY_FAILED,
        event_id(REPLY_FAILED, key),
        {"item_id": failed.id, "outbox_key": key, "error": "the helpdesk answered 422"},
    )
    page = await page_until(c, f"/items/{sent.id}", 'class="badge status-sent"')
    assert 'class="badge status-sending"' not in page and "Sent to the customer." in page
    page = await page_until(c, f"/items/{failed.id}", 'class="badge status-failed"')
    assert "<strong>Sending failed</strong>: the helpdesk answered 422" in page


async def test_overdue_items_lead_the_list_and_are_marked(
    web: str, browser_client: httpx.AsyncClient, nats_bus: Bus
) -> None:
    word = uuid.uuid4().hex[:10]
    now = dt.datetime.now(dt.UTC)
    old = draft_item(new_thread(), created_at=now - dt.timedelta(hours=5))
    late = draft_item(new_thread(), created_at=now - dt.timedelta(hours=1))
    old, late = (i.model_copy(update={"description": f"about {word}"}) for i in (old, late))
    await waiting(web, nats_bus, old, late)
    await log_in(browser_client, REVIEWER)
    page = (await browser_client.get(f"/inbox?text={word}")).text
    assert page.index(old.id) < page.index(late.id)  # oldest first, until one is overdue
    notice = Overdue(
        item_id=late.id,
        thread=late.thread,
        version=1,
        ticket_id=late.thread,
        day=dt.date(2026, 12, 1),
        at=now,
    )
    await publish(
        nats_bus,
        subjects.INBOX_OVERDUE,
        subjects.INBOX_OVERDUE,
        f"overdue:{late.thread}",
        notice.model_dump(mode="json"),
    )
    page = await page_until(browser_client, f"/inbox?text={word}", "overdue since 2026-12-01")
    assert page.index(late.id) < page.index(old.id)
    row = page[page.index(f'data-item="{late.id}"') :].split("</tr>")[0]
    assert "overdue since 2026-12-01" in row and 'class=" overdue"' in page
    assert "overdue since" not in page[page.index(f'data-item="{old.id}"') :].split("</tr>")[0]
    item = (await browser_client.get(f"/items/{late.id}")).text
    assert 'id="overdue">overdue since 2026-12-01' in item


async def test_items_near_and_past_their_target_lead_the_list_marked_and_queues_filter(
    web: str, browser_client: httpx.AsyncClient, nats_bus: Bus
) -> None:
    """The default targets: a normal item nears its 24 h after 18 h and passes it at 24 h."""
    word = uuid.uuid4().hex[:10]
    now = dt.datetime.now(dt.UTC)
    fresh = draft_item(new_thread(), created_at=now - dt.timedelta(hours=30), queue="billing")
    fresh = fresh.model_copy(update={"priority": "low"})  # low: 72 h, still in time
    near = draft_item(new_thread(), created_at=now - dt.timedelta(hours=20), queue="general")
    past = draft_item(new_thread(), created_at=now - dt.timedelta(hours=25), queue="billing")
    fresh, near, past = (
        i.model_copy(update={"description": f"about {word}"}) for i in (fresh, near, past)
    )
    await waiting(web, nats_bus, fresh, near, past)
    await log_in(browser_client, REVIEWER)
    page = (await browser_client.get(f"/inbox?text={word}")).text
    # the two that need attention first (oldest first among them), then the one in time
    assert page.index(past.id) < page.index(near.id) < page.index(fresh.id)

    def row(item: InboxItem) -> str:
        return page[page.rindex("<tr", 0, page.index(f'data-item="{item.id}"')) :].split("</tr>")[0]

    assert "past target" in row(past) and " late" in row(past)
    assert "due in " in row(near) and " near" in row(near)
    assert "target" not in row(fresh) and "due in" not in row(fresh)
    assert 'data-label="Queue">billing<' in row(past)
    assert '<option value="billing"' in page and '<option value="general"' in page

    billing = (await browser_client.get(f"/inbox?text={word}&queue=billing")).text
    assert past.id in billing and fresh.id in billing and near.id not in billing
    assert '<option value="billing" selected>' in billing
    # the development reviewer belongs to no queue: "mine" is what they have claimed
    mine = (await browser_client.get(f"/inbox?text={word}&mine=1")).text
    assert "Nothing here." in mine
    await browser_client.get(f"/items/{near.id}")  # opening it claims it
    mine = (await browser_client.get(f"/inbox?text={word}&mine=1")).text
    assert near.id in mine and past.id not in mine and fresh.id not in mine
    bad = await browser_client.get("/inbox?queue=Not%20A%20Queue")
    assert bad.status_code == 422 and "Unknown queue" in bad.text
    item = (await browser_client.get(f"/items/{past.id}")).text
    assert 'id="sla">past target' in item and 'id="queue">billing<' in item


async def test_a_supervisor_notification_and_its_failure_show_on_the_item(
    web: str, browser_client: httpx.AsyncClient, nats_bus: Bus
) -> None:
    item, other = draft_item(new_thread(), priority="urgent"), draft_item(new_thread())
    await waiting(web, nats_bus, item, other)
    await log_in(browser_client, REVIEWER)
    assert "A supervisor was notified" not in (await browser_client.get(f"/items/{item.id}")).text
    for kind, channel in ((NOTIFY_SENT, "slack"), (NOTIFY_FAILED, "log")):
        await publish(
            nats_bus,
            subjects.result(kind),
            kind,
            event_id(kind, f"notify:helpdesk:{item.thread}:{channel}"),
            {"ticket_id": item.thread, "channel": channel},
        )
    await page_until(browser_client, f"/items/{item.id}", "Notifying a supervisor failed")
    page = await page_until(browser_client, f"/items/{item.id}", "A supervisor was notified")
    assert re.search(r"A supervisor was notified \(slack, \d{4}-\d\d-\d\d \d\d:\d\d UTC\)", page)
    assert "Notifying a supervisor failed (log, " in page
    unrelated = (await browser_client.get(f"/items/{other.id}")).text
    assert "A supervisor was notified" not in unrelated and "Notifying a" not in unrelated


async def test_the_priority_filter_and_order_are_kept_across_pages(
    web: str, browser_client: httpx.AsyncClient, nats_bus: Bus
) -> None:
    word = uuid.uuid4().hex[:10]
    start = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=30)  # newer than the other tests'
    urgent = [
        draft_item(new_thread(), priority="urgent", created_at=start + dt.timedelta(seconds=n))
        for n in range(52)
    ]
    low = draft_item(new_thread(), priority="low", created_at=start - dt.timedelta(minutes=1))
    items = [i.model_copy(update={"description": f"about {word}"}) for i in (*urgent, low)]
    await waiting(web, nats_bus, *items)
    await log_in(browser_client, REVIEWER)
    c = browser_client

    by_priority = (await c.get(f"/inbox?text={word}&sort=priority")).text
    assert low.id not in by_priority  # the oldest, yet after fifty urgent ones
    following = re.search(r'<a href="([^"]+)">More', by_priority)
    assert following, "no link to the next page"
    last = (await c.get(following.group(1).replace("&amp;", "&"))).text
    assert last.index(urgent[51].id) < last.index(low.id)
    page = (await c.get(f"/inbox?text={word}&priority=urgent&sort=newest")).text
    assert page.count('<span class="flag prio-urgent">⚑ urgent</span>') == 50
    assert low.id not in page
    assert '<option value="urgent" selected>' in page
    assert '<option value="newest" selected>' in page
    more = re.search(r'<a href="([^"]+)">More', page)
    assert more, "no link to the next page"
    link = more.group(1).replace("&amp;", "&")
    assert "priority=urgent" in link and "sort=newest" in link and f"text={word}" in link
    rest = (await c.get(link)).text
    assert [urgent[1].id in rest, urgent[0].id in rest, low.id in rest] == [True, True, False]
    assert urgent[51].id not in rest
    tab = re.search(r'<a href="([^"]+)">sent', page)
    assert tab and "priority=urgent" in tab.group(1)
    await ignore_all(c, items)  # the other tests read the first page of waiting items


async def ignore_all(client: httpx.AsyncClient, items: list[InboxItem]) -> None:
    csrf = csrf_of((await client.get("/inbox")).text)
    for item in items:
        form = {"type": "ignore", "version": str(item.version), "csrf": csrf}
        assert (await client.post(f"/items/{item.id}/decide", data=form)).status_code == 303


# -- the edit flow and deciding ----------------------------------------------------------------


async def test_an_edit_preview_shows_the_diff_escaped(
    web: str, browser_client: httpx.AsyncClient, nats_bus: Bus
) -> None:
    item = draft_item(new_thread(), reply="Hi Jane,\n\nWe are on it.\n\nBest regards")
    await waiting(web, nats_bus, item)
    csrf = await log_in(browser_client, REVIEWER)
    edited = "Hi Jane,\r\n\r\nWe fixed it <b>today</b>.\r\n\r\nBest regards"
    answer = await browser_client.post(
        f"/items/{item.id}/edit", data={"reply": edited, "version": "1", "csrf": csrf}
    )
    assert answer.status_code == 200, answer.text
    assert "<del>are on</del>" in answer.text
    assert "<ins>fixed</ins>" in answer.text
    assert "&lt;b&gt;" in answer.text and "<b>today" not in answer.text
    assert 'action="/items/' in answer.text and 'name="type" value="edit"' in answer.text
    assert (
        await published_decisions(nats_bus, thread=item.thread) == []
    )  # a preview decides nothing


async def test_deciding_publishes_exactly_one_decision_and_redirects_with_a_message(
    web: str, browser_client: httpx.AsyncClient, nats_bus: Bus
) -> None:
    item = draft_item(new_thread())
    await waiting(web, nats_bus, item)
    csrf = await log_in(browser_client, REVIEWER)
    form = {
        "type": "edit",
        "version": "1",
        "csrf": csrf,
        "reply": "Hi Jane,\r\nYour refund is on its way.",
    }
    answer = await browser_client.post(f"/items/{item.id}/decide", data=form)
    assert answer.status_code == 303 and after_decision(answer.headers["location"], item.id)
    page = await browser_client.get("/inbox")
    assert f"Edited reply approved: {item.id}" in page.text
    assert item.id not in page.text.replace(f"approved: {item.id}", "")  # no longer waiting
    assert "approved" not in (await browser_client.get("/inbox")).text  # shown once

    again = await browser_client.post(f"/items/{item.id}/decide", data=form)  # a double click
    assert again.status_code == 303 and after_decision(again.headers["location"], item.id)
    other = await browser_client.post(f"/items/{item.id}/decide", data={**form, "reply": "No."})
    assert other.status_code == 409
    assert "not waiting" in other.text

    await eventually(lambda: published(nats_bus, item.thread), message="the decision published")
    [decision] = await published_decisions(nats_bus, thread=item.thread)
    assert decision["type"] == "edit"
    assert decision["reviewer"] == "reviewer"
    assert decision["args"]["args"]["reply"] == "Hi Jane,\nYour refund is on its way."
    assert decision["version"] == 1


async def test_bad_form_input_gets_a_4xx_page_never_a_500(
    web: str, browser_client: httpx.AsyncClient, nats_bus: Bus
) -> None:
    draft, notify = draft_item(new_thread()), notify_item(new_thread())
    await waiting(web, nats_bus, draft, notify)
    csrf = await log_in(browser_client, REVIEWER)
    c = browser_client
    decide = f"/items/{draft.id}/decide"
    cases: list[tuple[str, dict[str, str], int]] = [
        (decide, {"csrf": csrf}, 422),
        (decide, {"csrf": csrf, "type": "launch", "version": "1"}, 422),
        (decide, {"csrf": csrf, "type": "accept", "version": "one"}, 422),
        (decide, {"csrf": csrf, "type": "accept", "version": "0"}, 422),
        (decide, {"csrf": csrf, "type": "accept", "version": "²"}, 422),
        (decide, {"csrf": csrf, "type": "accept", "version": "9" * 40}, 422),
        (decide, {"csrf": csrf, "type": "accept", "version": "2"}, 409),
        (decide, {"csrf": csrf, "type": "edit", "version": "1", "reply": "  "}, 422),
        (decide, {"csrf": csrf, "type": "edit", "version": "1"}, 422),
        (decide, {"csrf": csrf, "type": "response", "version": "1", "feedback": ""}, 422),
        (decide, {"csrf": csrf, "type": "edit", "version": "1", "reply": "x" * 20_001}, 422),
        (f"/items/{draft.id}/edit", {"csrf": csrf, "version": "1", "reply": ""}, 422),
        (f"/items/{draft.id}/edit", {"csrf": csrf, "reply": "Hello"}, 422),
        (f"/items/{draft.id}/edit", {"csrf": csrf, "version": "7", "reply": "Hello"}, 409),
        (f"/items/{notify.id}/decide", {"csrf": csrf, "type": "accept", "version": "1"}, 422),
        (f"/items/{notify.id}/edit", {"csrf": csrf, "version": "1", "reply": "Hello"}, 422),
        ("/items/T0~v9/decide", {"csrf": csrf, "type": "accept", "version": "1"}, 404),
        ("/items/T0~v9/edit", {"csrf": csrf, "version": "1", "reply": "Hello"}, 404),
    ]
    for path, form, status in cases:
        answer = await c.post(path, data=form)
        assert answer.status_code == status, (path, form, answer.text[-300:])
        assert "text/html" in answer.headers["content-type"]
    assert (await c.post(decide, files={"csrf": ("a.txt", b"x")})).status_code == 400
    too_big = await c.post(decide, content=b"a=" + b"x" * 300_000)
    assert too_big.status_code == 413
    assert (await c.get("/items/T0~v9")).status_code == 404
    assert (await c.get("/inbox?status=lost")).status_code == 422
    assert (await c.get("/inbox?sort=sideways")).status_code == 422
    assert (await c.get("/inbox?priority=whenever")).status_code == 422
    assert (await c.get("/inbox?cursor=%%%")).status_code == 422
    assert await published_decisions(nats_bus, thread=draft.thread) == []
    assert "waiting" in (await c.get(f"/items/{draft.id}")).text


async def test_the_list_filters_and_its_version_stamp_follows_changes(
    web: str, browser_client: httpx.AsyncClient, nats_bus: Bus
) -> None:
    word = uuid.uuid4().hex[:10]
    now = dt.datetime.now(dt.UTC)  # ages are shown relative to the time of the request
    old = draft_item(
        new_thread(), category="shipping", created_at=now - dt.timedelta(hours=2, minutes=5)
    )
    new = draft_item(new_thread(), category="refund", created_at=now - dt.timedelta(minutes=3))
    tagged = new.model_copy(update={"description": f"mentions {word}"})
    await waiting(web, nats_bus, old, tagged)
    await log_in(browser_client, REVIEWER)
    c = browser_client

    page = (await c.get("/inbox")).text
    assert page.index(old.id) < page.index(tagged.id)  # oldest waiting first
    assert "2 h" in page and "3 min" in page
    newest = (await c.get("/inbox?sort=newest")).text
    assert newest.index(tagged.id) < newest.index(old.id)
    shipping = (await c.get("/inbox?category=shipping")).text
    assert old.id in shipping and tagged.id not in shipping
    found = (await c.get(f"/inbox?text={word}")).text
    assert tagged.id in found and old.id not in found
    assert old.id not in (await c.get("/inbox?status=sent")).text
    assert old.id in (await c.get("/inbox?status=all")).text

    stamp = (await c.get("/inbox/version")).json()["version"]
    assert f'data-version="{stamp}"' in (await c.get("/inbox")).text
    await waiting(web, nats_bus, draft_item(new_thread()))
    assert (await c.get("/inbox/version")).json()["version"] != stamp


# -- in a real browser ---------------------------------------------------------------------------


async def test_a_reviewer_edits_and_sends_the_oldest_draft_in_a_browser(
    web: str, nats_bus: Bus
) -> None:
    if not CHROMIUM.exists():
        pytest.skip("headless browser test needs Debian's chromium package")
    from playwright.async_api import async_playwright

    thread = new_thread()
    said = conversation(
        thread,
        ("customer", "My refund for order 881 never arrived."),
        ("agent", "Sorry about that, I have asked billing to check."),
        ("customer", "It is now two weeks. Please send it today."),
    )
    reply = "Hi Jane,\n\nWe are looking into your refund.\n\nBest regards,\nThe Support Team"
    oldest = draft_item(
        thread,
        reply=reply,
        created_at=NOW - dt.timedelta(days=400),
        round_id=said[-1].id,
        conversation=said,
        priority="urgent",
    ).model_copy(update={"warnings": ["the customer asked twice"]})
    second = draft_item(new_thread(), created_at=NOW - dt.timedelta(days=399))
    await waiting(web, nats_bus, oldest, second)
    edited = "Hi Jane,\n\nYour refund of $20 was sent today.\n\nBest regards,\nThe Support Team"

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            page = await browser.new_page(viewport={"width": 1100, "height": 1400})
            problems: list[str] = []
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(str(e)))

            await page.goto(web + "/")
            assert page.url.endswith("/login")
            await page.fill("#token", REVIEWER)
            await page.click("form.login button")
            await page.wait_for_url("**/inbox")

            rows = page.locator("#items tbody")
            row = rows.locator(f"tr[data-item='{oldest.id}']")
            flag = row.locator(".flag.prio-urgent")
            assert await flag.is_visible()
            assert (await flag.inner_text()).strip().lower() == "⚑ urgent"
            # overdue items (from other tests) lead the list; then the oldest draft
            first = rows.locator("tr:not(.overdue) a").first
            assert await first.get_attribute("href") == f"/items/{oldest.id}"
            await first.click()
            await page.wait_for_url(f"**/items/{oldest.id}")
            assert await page.locator("#draft").inner_text() == reply
            assert await page.locator("text=We are looking into your refund.").count() == 1
            assert (await page.content()).count(reply) == 1
            assert await page.locator("text=the customer asked twice").count() == 1
            shown = page.locator("#conversation .msg")
            assert await shown.count() == 3
            for n, m in enumerate(said):
                message = shown.nth(n)
                assert await message.is_visible()
                assert (await message.locator(".body").inner_text()) == m.body
                assert await message.get_attribute("class") == (
                    f"msg {m.author}" + (" answered" if m is said[-1] else "")
                )
            assert await page.locator(".msg.agent .name").inner_text() == "Sam from Support"
            assert await page.locator(".msg.answered .badge.answers").is_visible()
            assert "jane.doe@example.com" in await page.locator("#ticket").inner_text()
            await page.screenshot(path="/tmp/inbox-detail.png", full_page=True)

            await page.click("#edit-link")
            await page.wait_for_url(f"**/items/{oldest.id}?edit=1*")
            assert await page.locator("#reply").input_value() == reply
            assert await page.locator("#draft").count() == 0
            assert (await page.content()).count(reply) == 1
            await page.fill("#reply", edited)
            await page.click("text=Preview edit")
            await page.wait_for_url(f"**/items/{oldest.id}/edit")
            assert "was sent today" in " ".join(await page.locator("#diff ins").all_inner_texts())
            assert "are looking into" in " ".join(await page.locator("#diff del").all_inner_texts())

            await page.click("#send button")  # the next waiting item opens (overdue first)
            await page.wait_for_url(lambda url: after_decision(url.split(web)[-1], oldest.id))
            assert await page.locator(".flash").inner_text() == (
                f"Edited reply approved: {oldest.id}"
            )
            await page.keyboard.press("u")  # back to the list
            await page.wait_for_url("**/inbox")
            assert await rows.locator(f"a[href='/items/{oldest.id}']").count() == 0
            assert await rows.locator(f"a[href='/items/{second.id}']").count() == 1

            arriving = draft_item(new_thread(), created_at=NOW - dt.timedelta(days=398))
            await publish_item(nats_bus, arriving)  # the page reloads itself when it arrives
            link = rows.locator(f"a[href='/items/{arriving.id}']")
            await link.wait_for(timeout=12_000)
            assert problems == []
        finally:
            await browser.close()

    await eventually(lambda: published(nats_bus, oldest.thread), message="the decision published")
    [decision] = await published_decisions(nats_bus, thread=oldest.thread)
    assert decision["type"] == "edit"
    assert decision["args"]["args"]["reply"] == edited
    assert decision["reviewer"] == "reviewer"


@contextlib.asynccontextmanager
async def chromium() -> AsyncIterator[Any]:
    """Headless Chromium, for as long as the block runs (skips the test without it)."""
    if not CHROMIUM.exists():
        pytest.skip("headless browser test needs Debian's chromium package")
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield browser
        finally:
            await browser.close()


async def logged_in_page(browser: Any, web: str, problems: list[str]) -> Any:
    page = await browser.new_page(viewport={"width": 1100, "height": 1200})
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    await page.goto(web + "/login")
    await page.fill("#token", REVIEWER)
    await page.click("form.login button")
    await page.wait_for_url("**/inbox")
    return page


async def test_a_reviewer_takes_an_escalation_and_writes_the_reply_in_a_browser(
    web: str, nats_bus: Bus
) -> None:
    escalation = notify_item(new_thread())
    await waiting(web, nats_bus, escalation)
    reply = "Dear Jane,\n\nI have your case and will call you today.\n\nSam, Support lead"
    async with chromium() as browser:
        problems: list[str] = []
        page = await logged_in_page(browser, web, problems)
        await page.goto(f"{web}/items/{escalation.id}")
        assert await page.locator("#accept").count() == 0
        assert await page.locator("#ignore button").is_visible()
        await page.click("#take button")  # beside Ignore
        await page.wait_for_url(f"**/items/{escalation.id}?write=1*")
        assert "You are working on this" in await page.locator("#claim").inner_text()
        label = await page.locator("label[for=reply]").inner_text()
        assert f"a public reply on ticket {escalation.ticket_id}" in label
        await page.fill("#reply", reply)
        await page.click("#write button")
        await page.wait_for_url(lambda url: after_decision(url.split(web)[-1], escalation.id))
        assert f"Edited reply approved: {escalation.id}" in (
            await page.locator(".flash").inner_text()
        )
        assert problems == []
    await eventually(lambda: published(nats_bus, escalation.thread), message="the decision")
    [decision] = await published_decisions(nats_bus, thread=escalation.thread)
    assert (decision["type"], decision["reviewer"]) == ("edit", "reviewer")
    assert decision["args"] == {
        "action": "send_reply",
        "args": {"ticket_id": escalation.ticket_id, "reply": reply},
    }


async def test_an_admin_sees_and_replays_the_dead_letters_in_a_browser(
    web: str, browser_client: httpx.AsyncClient, nats_bus: Bus
) -> None:
    async def letters() -> list[int]:
        listed = await deadletters.list_dead_letters(nats_bus.js)
        return [d.id for d in listed if d.subject == subjects.INBOX_ITEM]

    for n in range(2):  # bytes the inbox cannot read: dead letters at once
        junk = f"junk-{uuid.uuid4()}"
        await nats_bus.publish(subjects.INBOX_ITEM, b"\x00 not an item %d" % n, msg_id=junk)
    await eventually(lambda: len_at_least(letters, 2), timeout=15, message="two dead letters")
    await log_in(browser_client, VIEWER)
    assert (await browser_client.get("/deadletters")).status_code == 403  # admins only
    assert "nav-dead-letters" not in (await browser_client.get("/inbox")).text
    first, second, *_ = await letters()
    async with chromium() as browser:
        problems: list[str] = []
        page = await logged_in_page(browser, web, problems)
        count = page.locator("#nav-dead-letters .badge")

        async def counted() -> bool:
            await page.reload()
            return await count.count() == 1 and int(await count.inner_text()) >= 2

        await eventually(counted, timeout=15, message="the count in the navigation")
        await page.click("#nav-dead-letters")
        await page.wait_for_url("**/deadletters")
        row = page.locator(f"#letter-{first}")
        assert "undecodable" in await row.locator(".reason").inner_text()
        assert "inbox_api" in await row.inner_text()
        async with page.expect_navigation():
            await row.locator("form.replay button").click()
        flash = await page.locator(".flash").inner_text()
        assert flash == f"Dead letter {first} replayed to {subjects.INBOX_ITEM}"
        assert await page.locator(f"#letter-{first}").count() == 0
        async with page.expect_navigation():
            await page.click("#replay-all button")
        assert (await page.locator(".flash").inner_text()).startswith("Replayed ")
        assert await page.locator(f"#letter-{second}").count() == 0
        assert problems == []
    left = await letters()  # a replayed letter the inbox still cannot read comes back anew
    assert first not in left and second not in left


async def len_at_least(read: Any, n: int) -> bool:
    return len(await read()) >= n
