"""Cases made of what reviewers sent: the inbox API's review log, each sent reply the
reference its draft is compared with."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from shared.inbox import CATEGORIES

from .cases import CaseFile
from .criteria import MONEY
from .errors import EvalError


def cases_from_review_log(decisions: list[dict[str, Any]], items: dict[str, Any]) -> CaseFile:
    """A case for each reply a reviewer sent (accepted, or edited): its conversation up to
    the round, the category, and the sent text as the reference."""
    cases = []
    for d in decisions:
        item = items.get(d.get("item_id") or "")
        if d.get("type") not in ("accept", "edit") or not item or not d.get("final_text"):
            continue
        if item.get("category") not in CATEGORIES:
            continue
        conversation = list(item.get("conversation") or [])
        answering = set(item.get("round_messages") or [])
        ends = [n for n, m in enumerate(conversation) if m.get("id") in answering]
        upto = conversation[: ends[-1] + 1] if ends else conversation  # what the reply answered
        said = [
            {"from": m["author"], "text": m["body"]}
            for m in upto
            if m.get("author") in ("customer", "agent") and m.get("body")
        ]
        if not said:
            continue
        subject = str((item.get("action_request") or {}).get("args", {}).get("subject") or "")
        cases.append(
            {
                "id": f"{item.get('ticket_id') or item['id']}-{item.get('round') or 'r1'}",
                "subject": subject.removeprefix("Re: "),
                "customer": ((item.get("customer") or {}).get("name") or "Alex"),
                "messages": said,
                "category": item["category"],
                "must_not": [MONEY],
                "reference": d["final_text"],
            }
        )
    unique = list({c["id"]: c for c in cases}.values())
    if not unique:
        raise EvalError("the review log holds no sent replies to make cases of")
    return CaseFile.model_validate({"version": 1, "name": "review-log", "cases": unique})


async def cases_from_inbox(url: str, token: str) -> CaseFile:
    import httpx

    headers = {"Authorization": f"Bearer {token}"}
    try:
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as client:
            answer = await client.get("/api/review-log")
            answer.raise_for_status()
            decisions = [json.loads(line) for line in answer.text.splitlines() if line.strip()]
            items: dict[str, Any] = {}
            for d in decisions:
                if d.get("type") in ("accept", "edit") and d.get("item_id") not in items:
                    got = await client.get(f"/api/items/{quote(d['item_id'], safe='')}")
                    if got.status_code == 200:
                        items[d["item_id"]] = got.json()
    except httpx.HTTPStatusError as exc:
        raise EvalError(f"the inbox API answered HTTP {exc.response.status_code}") from None
    except httpx.HTTPError as exc:
        raise EvalError(f"the inbox API at {url} cannot be reached: {exc}") from None
    return cases_from_review_log(decisions, items)
