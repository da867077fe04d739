"""Sending the workload plan: create each ticket in the demo helpdesk, then its signed webhook."""

from __future__ import annotations

import datetime as dt
import random
import time
from typing import Any

import httpx

from desk.helpdesk import create as create_ticket
from shared.helpdesk.events import ticket_event

from .. import conversations
from ..facts import Run, log
from ..webhooks import post_event
from .plan import Op


def workload(run: Run, ops: list[Op], rng: random.Random, steps: dict[int, str]) -> None:
    """Send the plan; a ticket with a conversation step (`steps`, slot → step) is handed to
    chaos/conversations.py just before its first event goes out."""
    sent: dict[int, dict[str, Any]] = {}  # id(op) -> the event it sent
    tickets: dict[int, Any] = {}  # slot -> Ticket
    pace = max(0.0, 12.0 / max(len(ops), 1))  # spread a small run over ~12 s of faults
    with httpx.Client(timeout=10) as client:
        for i, op in enumerate(ops):
            if run.stop.is_set():
                break
            started = time.monotonic()
            if op.kind == "silent":
                t = _create(run, op, rng)
                run.silent_tickets.add(t.id)
                continue
            if op.kind == "first":
                t = _create(run, op, rng)
                tickets[op.slot] = t
                run.webhook_tickets.add(t.id)
                if op.slot in steps:
                    conversations.planned(run, t.id, steps[op.slot])
                event = ticket_event(
                    "ticket.created",
                    t.id,
                    event_id=f"evt_chaos_{run.seed}_{i}",
                    updated_at=t.updated_at,
                    priority="normal",
                )
            elif op.kind == "older":
                t = tickets[op.slot]
                run.pair_tickets.add(t.id)
                # the same ticket again, with an older version, after the newer one
                event = ticket_event(
                    "ticket.created",
                    t.id,
                    event_id=f"evt_chaos_{run.seed}_{i}_older",
                    updated_at=t.updated_at - dt.timedelta(seconds=60),
                    priority="normal",
                )
            elif op.kind == "missing":
                tid = f"T{op.slot}"
                run.missing_tickets.add(tid)
                event = ticket_event(
                    "ticket.created", tid, event_id=f"evt_chaos_{run.seed}_{i}", priority="normal"
                )
            else:  # dup
                assert op.ref is not None
                if id(op.ref) not in sent:
                    continue  # its original was never accepted (stopped)
                event = sent[id(op.ref)]
            duplicate = post_event(run, client, event)
            if duplicate is None:
                continue
            with run.lock:
                run.sends += 1
                if op.kind == "dup":
                    run.planned_dups += 1
                    if duplicate:
                        run.dup_answers += 1
                    else:
                        run.dup_wrong.append(str(event["id"]))
                else:
                    sent[id(op)] = event
                    if duplicate:
                        run.first_dup += 1
            spent = time.monotonic() - started
            if pace > spent:
                time.sleep(pace - spent)
    run.sending_done.set()
    log(f"workload sent: {run.sends} accepted sends, {run.http_attempts} HTTP attempts")


def _create(run: Run, op: Op, rng: random.Random) -> Any:
    subject = rng.choice(
        ["Where is my refund?", "Invoice needs my VAT number", "Cannot log in", "Order late"]
    )
    body = "Hello, could you please help me with this? Thanks."
    if op.lawyer:
        subject = "Complaint"
        body = "If this is not fixed I will talk to my lawyer."
    while True:
        try:
            ticket = create_ticket(
                run.helpdesk_url, f"C{rng.randint(1, 9):03d}", subject, body, "normal"
            )
            break
        except Exception as exc:  # a locked SQLite file under load: try again
            log(f"creating a ticket failed ({exc.__class__.__name__}: {exc}); retrying")
            time.sleep(0.2)
    with run.lock:
        run.valid_tickets.add(ticket.id)
        if op.lawyer:
            run.lawyer_tickets.add(ticket.id)
    return ticket
