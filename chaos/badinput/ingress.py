"""The ingress part of the campaign: send each input, judge each answer, and re-send valid
events to see them answered as duplicates."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
from hypothesis import strategies as st

from ..facts import log
from .campaign import DEMO_TICKETS, Campaign
from .forgeries import forged
from .inputs import arbitrary, edge, malformed, valid
from .mail import mail_inputs, mail_setup
from .strategies import JSON_CT, Req, dumps, encoded, run_examples, signature_headers


def send(c: Campaign, client: httpx.Client, req: Req) -> httpx.Response | None:
    try:
        answer = client.request(req.method, req.path, headers=req.headers, content=req.body)
    except httpx.LocalProtocolError:
        c.tally.unsendable += 1
        return None
    except httpx.TransportError as exc:
        c.tally.dropped(req.group, f"{req.method} {req.path[:60]} ({req.label})", exc)
        return None
    judge_ingress(c, req, answer)
    return answer


def judge_ingress(c: Campaign, req: Req, answer: httpx.Response) -> None:
    t = c.tally
    status = answer.status_code
    t.answered(req.group, status)
    what = f"{req.group} {req.label}: {req.method} {req.path[:60]} -> {status}"
    if status >= 500:
        t.server_errors.append(f"{what} {answer.text[:120]}")
        return
    if 200 <= status < 300:
        # Nothing on the public port answers 2xx to anyone unsigned: not even health or
        # metrics, which are on the ops port.
        if req.group in ("ingress/arbitrary", "ingress/forged", "ingress/malformed"):
            t.forgeries.append(what)
            return
        if status == 202:
            try:
                duplicate = bool(answer.json()["duplicate"])
            except (ValueError, KeyError, TypeError):
                t.unexpected.append(f"{what}: not the 202 answer {answer.text[:80]}")
                return
            if duplicate:
                t.duplicates += 1
            else:
                t.accepted_new += 1
    if req.expect and status not in req.expect:
        t.unexpected.append(f"{what} (expected {sorted(req.expect)}) {answer.text[:100]}")


def control(c: Campaign, client: httpx.Client, req: Req) -> None:
    """A valid event: 202 as new; if re-sent, 202 as a duplicate."""
    answer = send(c, client, req)
    if answer is None or answer.status_code != 202:
        return
    if answer.json().get("duplicate"):
        c.tally.unexpected.append(f"{req.group} {req.label}: first send answered duplicate")
    if req.resend:
        source = req.source
        body = req.body
        msg_id = f"msg-again-{next(c.sequence)}"
        kept = [(k, v) for k, v in req.headers if not k.startswith(b"webhook-")]
        again = Req(
            req.group,
            req.label + " (again)",
            "POST",
            req.path,
            kept + encoded(signature_headers(c.secrets[source], msg_id, int(time.time()), body)),
            body,
            frozenset({202}),
            source,
        )
        second = send(c, client, again)
        if second is not None and second.status_code == 202 and not second.json()["duplicate"]:
            c.tally.unexpected.append(f"{again.group} {again.label}: not a duplicate")


def demo_events(c: Campaign, client: httpx.Client) -> None:
    """Ticket events for demo tickets: they become the waiting items the decision fuzz uses."""
    for ticket in DEMO_TICKETS:
        n = next(c.sequence)
        doc = {
            "id": f"evt-badinput-{c.seed}-{ticket}",
            "type": "ticket.created",
            "data": {"ticket_id": ticket, "priority": "normal"},
        }
        body = dumps(doc)
        headers = signature_headers(c.secrets["helpdesk"], f"msg-{n}", int(time.time()), body)
        req = Req(
            "ingress/valid",
            f"demo {ticket}",
            "POST",
            "/webhooks/helpdesk",
            encoded([JSON_CT, *headers]),
            body,
            frozenset({202}),
            "helpdesk",
        )
        control(c, client, req)


def ingress_campaign(c: Campaign, examples: int) -> None:
    with httpx.Client(base_url=c.ingress, timeout=15) as client:
        demo_events(c, client)
        mail_setup(c, lambda r: control(c, client, r))  # the conversations strangers go after
        groups: list[tuple[str, st.SearchStrategy[Req], int, Callable[[Req], Any]]] = [
            ("arbitrary", arbitrary(c), examples, lambda r: send(c, client, r)),
            ("forged", forged(c), examples, lambda r: send(c, client, r)),
            ("malformed", malformed(c), examples // 2, lambda r: send(c, client, r)),
            ("edge", edge(c), max(examples // 4, 12), lambda r: send(c, client, r)),
            ("valid", valid(c), max(examples // 4, 10), lambda r: control(c, client, r)),
            ("mail", mail_inputs(c), max(examples // 8, 16), lambda r: control(c, client, r)),
        ]
        for offset, (name, strategy, count, act) in enumerate(groups):
            started = time.monotonic()
            run_examples(strategy, count, c.seed + offset, act, c.tally, name)
            log(
                f"ingress {name}: {c.tally.tried['ingress/' + name]} requests "
                f"in {time.monotonic() - started:.1f}s"
            )
