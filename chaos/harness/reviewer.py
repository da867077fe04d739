"""The auto-reviewer: decides every waiting item (accept / edit / response at most once per
thread / ignore; notify items are ignored), deterministic per item id, except while a
conversation step holds the ticket."""

from __future__ import annotations

import random
import time
from typing import Any

import httpx

from ..facts import Run, log


def reviewer(run: Run) -> None:
    """Decide every waiting item, page by page, except those of tickets a step holds."""
    headers = {"Authorization": f"Bearer {run.token}"}
    with httpx.Client(base_url=run.inbox, headers=headers, timeout=10) as client:
        while not run.stop.is_set():
            decided = 0
            cursor = None
            while not run.stop.is_set():
                params = {"status": "waiting", "limit": "200"}
                if cursor:
                    params["cursor"] = cursor
                try:
                    answer = client.get("/api/items", params=params)
                    page = answer.json() if answer.status_code == 200 else {}
                except (httpx.HTTPError, ValueError):
                    page = {}
                for item in page.get("items", []):
                    if run.stop.is_set():
                        break
                    if run.is_held(item.get("ticket_id")):
                        continue
                    decide(run, client, item)
                    decided += 1
                cursor = page.get("next_cursor")
                if not cursor:
                    break
            time.sleep(0.05 if decided else 0.3)


def decide(run: Run, client: httpx.Client, item: dict[str, Any]) -> None:
    rng = random.Random(f"{run.seed}/{item['id']}")
    action = (item.get("action_request") or {}).get("action")
    config = item.get("config") or {}
    thread = item["thread"]
    if action == "notify_supervisor" or not config.get("allow_accept", True):
        kind = "ignore"
    else:
        r = rng.random()
        kind = "accept" if r < 0.5 else "edit" if r < 0.7 else "response" if r < 0.85 else "ignore"
        if kind == "response" and (thread in run.responded or not config.get("allow_respond")):
            kind = "accept"
    body: dict[str, Any] = {"type": kind, "version": item["version"]}
    if kind == "edit":
        body["args"] = (
            f"Hello,\n\nThank you for your patience; we are on it (reviewed {item['id']}).\n\n"
            "Kind regards,\nSupport"
        )
    elif kind == "response":
        body["args"] = "Please mention that we answer within two working days."
    try:
        answer = client.post(f"/api/items/{item['id']}/decision", json=body)
    except httpx.HTTPError as exc:
        run.decision_errors[exc.__class__.__name__] += 1
        return
    with run.lock:  # the conversation steps accept some drafts themselves
        if answer.status_code == 202:
            run.decisions[kind] += 1
            if kind == "response":
                run.responded.add(thread)
        elif answer.status_code == 409:
            run.decision_conflicts += 1
        else:
            run.decision_errors[str(answer.status_code)] += 1
    if answer.status_code not in (202, 409):
        if answer.status_code not in (502, 503, 504):
            log(f"decision {kind} on {item['id']} got {answer.status_code}: {answer.text[:200]}")
