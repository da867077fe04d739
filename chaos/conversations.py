"""The conversation workload: the customer writes again, a person answers, a ticket is closed.

A seeded share of the plan's single tickets (never an escalation, never a pair) gets one step:

- `again-waiting` (10 %): the customer writes again while the first draft waits; the draft
  must be superseded by a version answering both messages.
- `again-after` (10 %): the customer writes again after the reply was sent; a new round, a
  new item.
- `agent` (5 %): a person answers in the helpdesk while the draft waits; it is withdrawn.
- `close` (5 %): the ticket is closed while the draft waits; it is withdrawn.
- `close-approved` (3 %): the ticket is closed and, at once, its waiting draft accepted (by
  the harness); nothing may be delivered: the sender's fresh read finds it closed
  (`reply.withdrawn`), or the drafter withdrew the draft first (409).
- `again-approved` (3 %): the customer writes again and, at once, the waiting draft is
  accepted; it must not be delivered (`reply.withdrawn`, the customer wrote again) and the new
  message gets its own draft.

Each step changes the demo helpdesk (`desk.helpdesk.add_message` / `close`) and sends the
webhook a helpdesk would (`ticket.message.created`, `ticket.closed`), re-sent once in five
times. "While the draft waits" is made certain rather than left to a race with the
auto-reviewer: the ticket is held (the reviewer leaves its items alone) from its creation until
the step's effect shows in the inbox. A step whose first reply was never sent (ignored) is
skipped and counted.
"""

from __future__ import annotations

import datetime as dt
import random
import time
from dataclasses import dataclass
from typing import Any

import httpx

from shared.conversation import round_id
from shared.helpdesk.events import closed_event, message_event

from .facts import OPEN, Run, log
from .helpdesk import close_ticket, message
from .webhooks import send_extra

SHARES = {
    "again-waiting": 0.10,
    "again-after": 0.10,
    "agent": 0.05,
    "close": 0.05,
    "close-approved": 0.03,
    "again-approved": 0.03,
}
# steps taken while the first draft waits
HOLDING = ("again-waiting", "agent", "close", "close-approved", "again-approved")
CUSTOMER = ("again-waiting", "again-after", "again-approved")  # steps where the customer writes
ENDED = ("agent", "close", "close-approved")  # steps after which nothing may be delivered
# Seconds a draft, a reply or a step's effect may take to show in the inbox. Generous: at the
# default size the drafter's queue can hold minutes of work, and a step's webhook waits behind it.
EFFECT_TIMEOUT = 900.0
CHECK_EVERY = (1.0, 3.0)  # seconds between two looks at one ticket: soon after a change, later

FOLLOW_UP = "Any news on this? I am still waiting for an answer, thank you."
AGENT_ANSWER = "Hello, I have just sorted this out for you. Kind regards, Maya from support"

REASONS = {
    "agent": "a person answered in the helpdesk",
    "close": "the ticket was closed",
    "close-approved": "the ticket was closed",
    "again-approved": "the customer wrote again",
}


@dataclass
class Task:
    ticket: str
    kind: str
    step: str = "wait"  # wait → acted → done | skipped | timed out
    since: float = 0.0
    next_check: float = 0.0
    waiting_item: str | None = None  # the draft that waited when the step was taken
    changed_at: dt.datetime | None = None  # the ticket's updated_at after the step
    message_id: str | None = None
    round: str | None = None  # the round the new customer message opens
    approved: bool | None = None  # `-approved` steps: the harness's accept was taken (202)
    effect: str = ""


def assign(ops: list[Any], seed: int) -> dict[int, str]:
    """Ticket slot → conversation step, for a seeded share of the single tickets."""
    pairs = {op.slot for op in ops if op.kind == "older"}
    singles = [op.slot for op in ops if op.kind == "first" and not op.lawyer]
    eligible = sorted(set(singles) - pairs)
    random.Random(f"{seed}/conversations").shuffle(eligible)
    steps: dict[int, str] = {}
    for kind, share in SHARES.items():
        for _ in range(max(1, round(share * len(eligible)))):
            if eligible:
                steps[eligible.pop()] = kind
    return steps


def planned(run: Run, ticket: str, kind: str) -> None:
    """The workload created `ticket` for step `kind`: hold it before its first event goes out."""
    if kind in HOLDING:
        run.hold(ticket)
    with run.lock:
        run.tasks.append(Task(ticket, kind, since=time.monotonic()))


def versions(inbox: httpx.Client, ticket: str) -> list[dict[str, Any]] | None:
    """Every version of the ticket's thread (all its rounds), [] before the first; None if
    the inbox API did not answer."""
    try:
        answer = inbox.get(f"/api/items/{ticket}~v1")
    except httpx.HTTPError:
        return None
    if answer.status_code == 404:
        return []
    if answer.status_code != 200:
        return None
    try:
        return list(answer.json()["versions"])
    except (ValueError, KeyError):
        return None


def conversations(run: Run) -> None:
    """Take each planned step when its moment comes; until every step is settled."""
    rng = random.Random(f"{run.seed}/conversation-webhooks")
    headers = {"Authorization": f"Bearer {run.token}"}
    with (
        httpx.Client(timeout=10) as hooks,
        httpx.Client(base_url=run.inbox, headers=headers, timeout=10) as inbox,
    ):
        while not run.stop.is_set():
            with run.lock:
                active = [t for t in run.tasks if t.step in ("wait", "acted")]
            if not active and run.sending_done.is_set():
                break
            for task in active:
                if run.stop.is_set() or task.next_check > time.monotonic():
                    continue
                found = versions(inbox, task.ticket)
                if found is not None:
                    _advance(run, hooks, inbox, rng, task, found)
                soon = time.monotonic() - task.since < 10
                task.next_check = time.monotonic() + CHECK_EVERY[0 if soon else 1]
            run.stop.wait(0.2)
    for task in run.tasks:
        run.release(task.ticket)
    run.conversations_done.set()
    counts: dict[str, int] = {}
    for task in run.tasks:
        counts[task.step] = counts.get(task.step, 0) + 1
    log(f"conversation steps settled: {counts}")


def _advance(
    run: Run,
    hooks: httpx.Client,
    inbox: httpx.Client,
    rng: random.Random,
    task: Task,
    found: list[dict[str, Any]],
) -> None:
    waiting = [v for v in found if v["status"] == "waiting"]
    settled = bool(found) and not any(v["status"] in OPEN for v in found)
    spent = time.monotonic() - task.since
    if task.step == "wait":
        if task.kind in HOLDING and waiting:
            _act(run, hooks, inbox, rng, task, waiting[-1])
        elif task.kind == "again-after" and settled and any(v["status"] == "sent" for v in found):
            _act(run, hooks, inbox, rng, task, None)
        elif settled:
            what = "no draft waited" if task.kind in HOLDING else "no reply was sent"
            _finish(run, task, "skipped", f"{what}: {found[-1]['status']}")
        elif spent > EFFECT_TIMEOUT:
            _timed_out(run, task, f"nothing to act on after {spent:.0f}s", found)
        return
    # acted: has the system done what the step asks for?
    before = next((v for v in found if v["id"] == task.waiting_item), None)
    ended = before is not None and before["status"] not in OPEN
    newer = [v for v in found if task.round and v.get("round") == task.round]
    if (newer or task.kind not in CUSTOMER) and (ended or task.kind == "again-after"):
        what = f"{newer[0]['id']} for round {task.round}" if newer else ""
        _finish(run, task, "done", what or f"{task.waiting_item} {(before or {}).get('status')}")
        return
    if spent > EFFECT_TIMEOUT:
        _timed_out(run, task, f"no effect {spent:.0f}s after the step", found)


def _act(
    run: Run,
    hooks: httpx.Client,
    inbox: httpx.Client,
    rng: random.Random,
    task: Task,
    waiting: dict[str, Any] | None,
) -> None:
    event_id = f"evt_chaos_{run.seed}_{task.ticket}_{task.kind}"
    if task.kind.startswith("close"):
        ticket = close_ticket(run, task.ticket)
        if ticket is None:
            return
        event = closed_event(ticket, event_id=event_id)
    else:
        author = "customer" if task.kind in CUSTOMER else "agent"
        body = AGENT_ANSWER if author == "agent" else FOLLOW_UP
        made = message(run, task.ticket, body, author)
        if made is None:
            return
        ticket, new = made
        task.message_id = new.id
        if task.kind in CUSTOMER:
            task.round = round_id(new.id)
        event = message_event(ticket, new, event_id=event_id)
    task.changed_at = ticket.updated_at
    task.waiting_item = waiting["id"] if waiting else None
    task.step = "acted"
    task.since = time.monotonic()
    send_extra(run, hooks, event, rng)
    if waiting is not None and task.kind.endswith("-approved"):
        task.approved = _accept(run, inbox, waiting)


def _accept(run: Run, inbox: httpx.Client, item: dict[str, Any]) -> bool | None:
    """Accept `item` now, as a reviewer would; True if taken, False if refused (409)."""
    body = {"type": "accept", "version": item["version"]}
    while not run.stop.is_set():
        try:
            answer = inbox.post(f"/api/items/{item['id']}/decision", json=body)
        except httpx.HTTPError:
            time.sleep(0.2)
            continue
        if answer.status_code == 202:
            with run.lock:
                run.decisions["accept"] += 1
            return True
        if answer.status_code == 409:
            with run.lock:
                run.decision_conflicts += 1
            return False
        if answer.status_code < 500:
            log(f"accepting {item['id']}: {answer.status_code} {answer.text[:200]}")
            return None
        time.sleep(0.2)
    return None


def _finish(run: Run, task: Task, step: str, effect: str) -> None:
    task.step = step
    task.effect = effect
    run.release(task.ticket)


def _timed_out(run: Run, task: Task, why: str, found: list[dict[str, Any]]) -> None:
    states = ", ".join(f"{v['id']}={v['status']}" for v in found) or "no item"
    with run.lock:
        run.conversation_problems.append(f"{task.ticket} {task.kind}: {why} ({states})")
    _finish(run, task, "timed out", why)
