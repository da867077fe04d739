"""`desk send-webhook`: sign and send a sample event, as a helpdesk would.

Defaults come from the running stack (`var/stack.json`, `var/dev-credentials.json`), so against
`desk up` it needs no arguments at all.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import json
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from shared.signatures import github_sign, standard_sign, stripe_sign

from .statefile import STATE_FILE


class SendError(RuntimeError):
    pass


MAIL_SOURCE = "email"  # the demo source whose events are inbound mails (services/ingress/sources)


def sample_mail(event_id: str | None) -> dict[str, Any]:
    """An inbound mail as the demo `email` source carries it (the Postmark-style body the IMAP
    poller also makes: services/ingress/imap.py), with a new Message-ID unless `event_id`."""
    message_id = event_id or f"{uuid.uuid4().hex[:16]}@mail.example.com"
    return {
        "MessageID": message_id,
        "From": "Robin Sample <robin.sample@example.com>",
        "To": "support@example.com",
        "Subject": "Where is my refund?",
        "TextBody": "Hello, I returned my order two weeks ago and have not had my refund yet.",
        "Date": email.utils.formatdate(usegmt=True),
    }


def sample_event(
    event_type: str, ticket: str, priority: str, event_id: str | None
) -> dict[str, Any]:
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return {
        "id": event_id or f"evt_{uuid.uuid4().hex[:16]}",
        "type": event_type,
        "created_at": now,
        "data": {"ticket_id": ticket, "priority": priority, "updated_at": now},
    }


def signed_headers(scheme: str, secret: str, event: dict[str, Any], body: bytes) -> dict[str, str]:
    try:
        return _signed_headers(scheme, secret, event, body)
    except ValueError as exc:  # the message says what is wrong, never the secret itself
        raise SendError(f"the secret cannot sign a {scheme} webhook: {exc}") from None


def _signed_headers(scheme: str, secret: str, event: dict[str, Any], body: bytes) -> dict[str, str]:
    stamp = int(time.time())
    ident = str(event["id"] if "id" in event else event["MessageID"])  # a mail has no event id
    headers = {"Content-Type": "application/json"}
    if scheme == "standard":
        headers.update(
            {
                "webhook-id": ident,
                "webhook-timestamp": str(stamp),
                "webhook-signature": standard_sign(secret, ident, stamp, body),
            }
        )
    elif scheme == "stripe":
        headers["Stripe-Signature"] = stripe_sign(secret, stamp, body)
    elif scheme == "github":
        headers.update(
            {
                "X-Hub-Signature-256": github_sign(secret, body),
                "X-GitHub-Delivery": ident,
                "X-GitHub-Event": str(event.get("type", "email.received")),
            }
        )
    else:
        raise SendError(f"unknown scheme {scheme!r}")
    return headers


def defaults(var_dir: Path, source: str) -> tuple[str | None, str | None, list[str]]:
    """(ingress URL, the source's dev secret, the dev sources) from the running stack, where
    there is one."""
    url = secret = None
    known: list[str] = []
    try:
        state = json.loads((var_dir / STATE_FILE).read_text())
        url = state["services"]["ingress"]["url"]
        creds = json.loads(Path(state["credentials"]).read_text())
        known = sorted(creds.get("webhook_secrets", {}))
        secret = creds.get("webhook_secrets", {}).get(source)
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    return url, secret, known


def send(
    *,
    url: str,
    source: str,
    secret: str,
    scheme: str,
    event: dict[str, Any],
    repeat: int,
) -> list[tuple[int, str]]:
    """Send the same event `repeat` times (re-signed each time); return (status, body) per send."""
    body = json.dumps(event).encode()
    answers = []
    with httpx.Client(timeout=10) as client:
        for _ in range(repeat):
            headers = signed_headers(scheme, secret, event, body)
            try:
                answer = client.post(f"{url}/webhooks/{source}", content=body, headers=headers)
            except httpx.HTTPError as exc:
                raise SendError(
                    f"cannot reach ingress at {url}: {exc.__class__.__name__}"
                ) from None
            answers.append((answer.status_code, answer.text))
    return answers
