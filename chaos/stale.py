"""Stale scans mid-run: `desk reconcile --stale` against the running stack, twice, among faults.

The stack and the scans run with `DESK_STALE_DAYS=2` (and the reconciler's own daily scan moved
out of the way), so every open demo ticket (last touched before 2026-11-28) is stale. At the
start of the run the harness adds old tickets of its own (chaos/helpdesk.py `backdate`: three
days old, as a helpdesk would list a ticket nobody touched since), each with its
`ticket.created` webhook:

- half of them are held (the reviewer leaves them alone) until the first scan has marked their
  waiting draft overdue: the reminder must do that and add no item;
- the other half are reviewed before the first scan: one whose reply was sent must get exactly
  one follow-up draft (round `followup-<date>`), one whose draft was ignored its round again.

The injector asks for scan 1 after its third fault and scan 2 after its seventh, and waits
until it ran, so both run while faults happen. A scan reminds a ticket at most once a day: the
second one, the same day, must remind nobody again, however many tickets have been answered in
between (no second follow-up, no second overdue mark).
"""

from __future__ import annotations

import datetime as dt
import os
import random
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field

import httpx

from desk.helpdesk import create as create_ticket
from shared.helpdesk.events import ticket_event

from .conversations import versions
from .facts import OPEN, Run, log
from .helpdesk import backdate, retrying
from .webhooks import send_extra

STALE_DAYS = 2  # DESK_STALE_DAYS for the stack and the scans
AGE_DAYS = 3.0  # how old the harness makes its stale tickets
NEVER = "0 0 29 2 *"  # DESK_STALE_CRON: the reconciler's own daily scan stays out of the way
SCAN_AFTER = (3, 7)  # the injector's fault count before scan 1 and scan 2
READY_TIMEOUT = 300.0  # seconds for the held drafts to wait, and the reviewed ones to end
OVERDUE_TIMEOUT = 900.0  # seconds for a reminder to reach a held draft (behind any backlog)
_REMINDED = re.compile(r"stale scan: (\d+) reminded(?: \(([^)]*)\))?")


@dataclass
class Scan:
    number: int
    day: dt.date
    faults_before: int
    reminded: list[str] = field(default_factory=list)
    waiting: dict[str, str] = field(default_factory=dict)  # held ticket → its waiting item
    answered: dict[str, str] = field(default_factory=dict)  # reviewed ticket → final status
    overdue: set[str] = field(default_factory=set)  # held tickets whose item became overdue
    attempts: int = 0
    ok: bool = False
    problems: list[str] = field(default_factory=list)


@dataclass
class Batch:
    held: list[str] = field(default_factory=list)
    reviewed: list[str] = field(default_factory=list)


def per_kind(events: int) -> int:
    return max(2, round(events / 100))


def scanner(run: Run) -> None:
    rng = random.Random(f"{run.seed}/stale")
    headers = {"Authorization": f"Bearer {run.token}"}
    with (
        httpx.Client(timeout=10) as hooks,
        httpx.Client(base_url=run.inbox, headers=headers, timeout=10) as inbox,
    ):
        batch = _batch(run, hooks, rng, per_kind(run.events))
        awaiting: dict[str, tuple[str, Scan, float]] = {}  # held ticket → its item, the scan
        number = 1
        while not run.stop.is_set():
            if number <= len(SCAN_AFTER) and run.scans_wanted >= number:
                scan = Scan(number, dt.datetime.now(dt.UTC).date(), len(run.faults))
                if number == 1:
                    _ready(run, inbox, scan, batch)
                _scan(run, scan)
                run.scans_run = number  # the injector goes on with its faults
                for ticket, item in scan.waiting.items():
                    if ticket in scan.reminded:
                        awaiting[ticket] = (item, scan, time.monotonic())
                with run.lock:
                    run.scans.append(scan)
                log(
                    f"stale scan {number} (after {scan.faults_before} faults): "
                    f"{len(scan.reminded)} reminded"
                )
                number += 1
            _overdue(run, inbox, awaiting)
            if number > len(SCAN_AFTER) and not awaiting:
                break
            run.stop.wait(0.5)
    for ticket in batch.held:
        run.release(ticket)
    run.scans_run = len(SCAN_AFTER)
    run.scans_done.set()


def _batch(run: Run, hooks: httpx.Client, rng: random.Random, size: int) -> Batch:
    """`size` held and `size` reviewed tickets, three days old, each announced by a webhook."""
    batch = Batch()
    for i in range(2 * size):
        hold = i % 2 == 0
        made = retrying(
            run,
            "creating a stale ticket",
            lambda: create_ticket(
                run.helpdesk_url,
                f"C{rng.randint(1, 9):03d}",
                rng.choice(["Still no refund", "Order never arrived", "Account locked"]),
                "I wrote about this a while ago. Could you please look into it?",
                "normal",
            ),
        )
        if made is None:
            return batch
        with run.lock:
            run.valid_tickets.add(made.id)
            run.webhook_tickets.add(made.id)
            run.stale_tickets.add(made.id)
        if hold:
            run.hold(made.id)
        old = backdate(run, made.id, AGE_DAYS)
        if old is None:
            return batch
        (batch.held if hold else batch.reviewed).append(made.id)
        event = ticket_event(
            "ticket.created",
            made.id,
            event_id=f"evt_chaos_{run.seed}_stale_{i}",
            updated_at=old.updated_at,
            priority="normal",
        )
        send_extra(run, hooks, event, rng)
    return batch


def _ready(run: Run, inbox: httpx.Client, scan: Scan, batch: Batch) -> None:
    """Wait until every held stale ticket's draft waits and every reviewed one is settled."""
    deadline = time.monotonic() + READY_TIMEOUT
    todo = set(batch.held) | set(batch.reviewed)
    while todo and not run.stop.is_set() and time.monotonic() < deadline:
        for ticket in sorted(todo):
            found = versions(inbox, ticket)
            if not found:
                continue
            if ticket in batch.held:
                waiting = [v for v in found if v["status"] == "waiting"]
                if waiting:
                    scan.waiting[ticket] = waiting[-1]["id"]
                    todo.discard(ticket)
            elif not any(v["status"] in OPEN for v in found):
                scan.answered[ticket] = found[-1]["status"]
                todo.discard(ticket)
        if todo:
            run.stop.wait(0.5)
    for ticket in sorted(todo):
        scan.problems.append(f"{ticket} not ready before the scan")


def _scan(run: Run, scan: Scan) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DESK_")}
    env.update({"DESK_VAR_DIR": str(run.var), "DESK_STALE_DAYS": str(STALE_DAYS)})
    deadline = time.monotonic() + 90
    while not run.stop.is_set() and time.monotonic() < deadline:
        scan.attempts += 1
        try:
            done = subprocess.run(
                [sys.executable, "-m", "desk", "reconcile", "--stale"],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
        except subprocess.TimeoutExpired:
            continue
        found = _REMINDED.search(done.stdout)
        if done.returncode == 0 and found:
            scan.reminded = [t.strip() for t in (found.group(2) or "").split(",") if t.strip()]
            scan.ok = True
            return
        # the broker may be down for a moment (a fault): try again
        log(f"desk reconcile --stale: exit {done.returncode}: {done.stderr.strip()[-200:]}")
        run.stop.wait(2.0)
    scan.problems.append(f"desk reconcile --stale did not succeed in {scan.attempts} attempts")


def _overdue(run: Run, inbox: httpx.Client, awaiting: dict[str, tuple[str, Scan, float]]) -> None:
    """Release each held draft once the scan's reminder has marked it overdue."""
    for ticket, (item, scan, since) in list(awaiting.items()):
        try:
            answer = inbox.get(f"/api/items/{item}")
            marked = answer.status_code == 200 and bool(answer.json().get("overdue_since"))
        except (httpx.HTTPError, ValueError):
            marked = False
        if marked:
            scan.overdue.add(ticket)
        elif time.monotonic() - since > OVERDUE_TIMEOUT:
            scan.problems.append(f"{item} not marked overdue {OVERDUE_TIMEOUT:.0f}s after the scan")
        else:
            continue
        del awaiting[ticket]
        run.release(ticket)
