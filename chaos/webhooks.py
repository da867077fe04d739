"""Signed webhooks to the stack's ingress, sent until accepted (202)."""

from __future__ import annotations

import json
import random
import time
from typing import Any

import httpx

from desk.webhook import signed_headers

from .facts import Run, log


def post_event(run: Run, client: httpx.Client, event: dict[str, Any]) -> bool | None:
    """Send one event until it is accepted (202); its `duplicate` flag, None if we gave up."""
    body = json.dumps(event).encode()
    while not run.stop.is_set():
        headers = signed_headers("standard", run.secret, event, body)
        run.http_attempts += 1
        try:
            answer = client.post(f"{run.ingress}/webhooks/helpdesk", content=body, headers=headers)
        except httpx.HTTPError as exc:
            run.send_errors[exc.__class__.__name__] += 1
            time.sleep(0.3)
            continue
        if answer.status_code == 202:
            return bool(answer.json().get("duplicate"))
        run.send_errors[str(answer.status_code)] += 1
        if answer.status_code < 500:
            log(f"ingress refused {event['id']}: {answer.status_code} {answer.text[:200]}")
            return None
        time.sleep(0.3)
    return None


def send_extra(run: Run, client: httpx.Client, event: dict[str, Any], rng: random.Random) -> bool:
    """A webhook outside the planned mix (a new message, a close, a stale ticket's creation),
    re-sent once in five times like the planned duplicates; True if it was accepted."""
    duplicate = post_event(run, client, event)
    if duplicate is None:
        return False
    with run.lock:
        run.sends += 1
        run.conversation_sends += 1
        if duplicate:
            run.first_dup += 1
    if rng.random() < 0.2:
        again = post_event(run, client, event)
        if again is not None:
            with run.lock:
                run.sends += 1
                run.conversation_sends += 1
                run.planned_dups += 1
                if again:
                    run.dup_answers += 1
                else:
                    run.dup_wrong.append(str(event["id"]))
    return True
