"""Auto-send through the whole system, as an admin drives it: reviewers send a category's drafts
unedited, `desk eval` passes, the admin turns auto-send on with that evidence, and the next
draft of the category is sent by the sender through its outbox — marked auto in the result
event — with no reviewer, while a draft of another category still waits."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from services.router.rules import DEFAULT_RULES
from tests.helpers import eventually

from .test_conversations import item, results, status_of
from .test_stack import Stack, all_healthy, desk, stack

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)

__all__ = ["stack"]


def refund_ticket(stack: Stack, subject: str, body: str) -> str:
    made = desk(
        stack, "helpdesk", "create", "--customer", "C005", "--subject", subject, "--body", body
    )
    assert made.returncode == 0, made.stderr
    ticket = made.stdout.split()[0]
    sent = desk(stack, "send-webhook", "--ticket", ticket)
    assert sent.returncode == 0, sent.stderr
    return ticket


def admin(stack: Stack, path: str, body: dict[str, Any]) -> httpx.Response:
    state = stack.state()
    token = json.loads(Path(state["credentials"]).read_text())["reviewer_token"]
    url = state["services"]["inbox_api"]["url"]
    return httpx.post(
        f"{url}{path}", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=10
    )


async def test_an_admin_turns_auto_send_on_with_evidence_and_the_sender_sends_it(
    stack: Stack, tmp_path: Path
) -> None:
    # this desk's helpdesk takes refunds only: its routing rules say so (the demo rules, and a
    # category for every helpdesk ticket); auto-send believes them, not the model alone
    rules = tmp_path / "rules.toml"
    rules.write_text(
        DEFAULT_RULES.read_text()
        + '\n[[rules]]\nname = "refunds"\ntypes = ["ticket.*"]\n'
        + 'targets = ["drafter"]\ncategory = "refund"\n'
    )
    stack.env.update(
        {
            "DESK_ADMINS": '["reviewer"]',
            "DESK_AUTOSEND_EVIDENCE": "2",
            "DESK_AUTOSEND_AUDIT": "1",
            "DESK_RULES_FILE": str(rules),
        }
    )
    stack.up()
    await eventually(lambda: all_healthy(stack), timeout=60, message="six healthy services")
    for n, text in enumerate(("I want my money back for the broken lamp.", "Refund my order.")):
        ticket = refund_ticket(stack, f"Refund please {n}", text)
        await eventually(lambda t=ticket: item(stack, f"{t}~v1"), timeout=30, message="drafted")
        assert (item(stack, f"{ticket}~v1") or {})["category"] == "refund"
        accepted = desk(stack, "inbox", "accept", f"{ticket}~v1")
        assert accepted.returncode == 0, accepted.stderr

    report = tmp_path / "eval.json"
    evaluated = desk(stack, "eval", "--json", str(report))
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr
    refused = admin(stack, "/api/autosend/refund", {"enabled": True})  # no eval: no
    assert refused.status_code == 422, refused.text
    on = admin(
        stack, "/api/autosend/refund", {"enabled": True, "eval": json.loads(report.read_text())}
    )
    assert on.status_code == 200, on.text

    auto = refund_ticket(stack, "Where is my refund?", "The refund for my order is not here.")
    other = desk(stack, "send-webhook", "--ticket", "T1005")  # account: a reviewer's turn
    assert other.returncode == 0, other.stderr
    await eventually(
        lambda: status_of(stack, f"{auto}~v1", "sent"), timeout=60, message="auto-sent"
    )
    shown = item(stack, f"{auto}~v1") or {}
    assert (shown["auto"], shown["audit"]) == (True, "waiting")
    assert [d["reviewer"] for d in shown["decisions"]] == ["auto-send"]

    async def auto_result() -> list[Any]:
        return [
            e
            for e in await results(stack, "reply.sent")
            if e.data["ticket_id"] == auto  # type: ignore[index]
        ]

    await eventually(auto_result, timeout=30, message="its reply.sent")
    [sent] = await auto_result()
    assert sent.data["auto"] is True and sent.data["reviewer"] == "auto-send"  # type: ignore[index]
    await eventually(lambda: item(stack, "T1005~v1"), timeout=30, message="T1005 drafted")
    assert (item(stack, "T1005~v1") or {})["status"] == "waiting"
