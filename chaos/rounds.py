"""The invariants about items, rounds and replies, from what the run left behind (pure).

Inputs: every inbox item (the list API), the result events stored in the RESULTS stream, the
sender's outbox rows, the keys the channel took, the decisions on the tickets a step closed or
answered, and the harness's own record of what it did. Each function returns one line:
(holds, name, text).
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from shared import ids
from shared.helpdesk.demo import TICKETS as DEMO_TICKETS

from .conversations import CUSTOMER, ENDED, REASONS
from .facts import OPEN, TERMINAL, Run

Line = tuple[bool, str, str]
ENDINGS = ("reply.sent", "reply.withdrawn", "reply.failed")
DEMO = {t.id for t in DEMO_TICKETS}


@dataclass(frozen=True)
class Result:
    id: str
    type: str
    data: dict[str, Any]

    @property
    def round(self) -> tuple[str, str]:
        return str(self.data.get("ticket_id") or ""), str(self.data.get("round") or "")


def results_of(stored: Iterable[Any]) -> list[Result]:
    """The stored result events (CloudEvents JSON), every copy (a republish may store one twice)."""
    found = []
    for m in stored:
        try:
            event = json.loads(m.data)
            found.append(
                Result(str(event["id"]), str(event["type"]), dict(event.get("data") or {}))
            )
        except (ValueError, KeyError, TypeError):
            found.append(Result("<unreadable>", m.subject.removeprefix("results."), {}))
    return found


def unique(results: list[Result], kind: str) -> list[Result]:
    seen: dict[str, Result] = {}
    for r in results:
        if r.type == kind:
            seen.setdefault(r.id, r)
    return list(seen.values())


def by_ticket(items: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for item in items:
        found[str(item["ticket_id"])].append(item)
    for versions in found.values():
        versions.sort(key=lambda i: i["version"])
    return found


def _key(item: dict[str, Any]) -> str:
    action = str((item.get("action_request") or {}).get("action") or "")
    return ids.outbox(str(item["ticket_id"] or item["thread"]), item.get("round") or "r1", action)


def approvals(items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """(the approved items the sender acts on, the ids of approvals a redraft overtook).

    An accept that lands just before a new version of the same round (the drafter answering a
    withdrawn reply's message too) is refused by drafter and sender: the inbox shows it
    superseded, and the reviewer decides the new version."""
    decided = [i for i in items if i.get("decision") in ("accept", "edit")]
    overtaken = [str(i["id"]) for i in decided if i["status"] == "superseded"]
    return [i for i in decided if i["status"] != "superseded"], overtaken


def _trigger(item: dict[str, Any]) -> str:
    return str((item.get("trigger") or {}).get("type") or "")


def _some(values: Iterable[str], n: int = 6) -> str:
    listed = sorted(values)
    return (" " + ", ".join(listed[:n]) + (" …" if len(listed) > n else "")) if listed else ""


def reminded_demo(run: Run) -> set[str]:
    return {t for scan in run.scans for t in scan.reminded if t in DEMO}


# -- the lines -------------------------------------------------------------------------------


def terminal(run: Run, items: list[dict[str, Any]]) -> Line:
    """Every valid ticket has an item, and every item of every ticket is final."""
    tickets = by_ticket(items)
    demo = reminded_demo(run)
    bad: list[str] = []
    final: Counter[str] = Counter()
    for tid in sorted(run.valid_tickets | (demo & set(tickets))):
        versions = tickets.get(tid, [])
        if not versions:
            bad.append(f"{tid}:no item")
            continue
        bad += [f"{i['id']}={i['status']}" for i in versions if i["status"] not in TERMINAL]
        final[versions[-1]["status"]] += 1
        if (versions[-1].get("action_request") or {}).get("action") == "notify_supervisor":
            final["notify"] += 1
    unexpected = sorted(set(tickets) - run.valid_tickets - demo)
    return (
        not bad and not unexpected,
        "terminal",
        f"{len(run.valid_tickets)} valid tickets ({len(run.webhook_tickets)} by webhook, "
        f"{len(run.silent_tickets)} reconciler-only, {len(run.pair_tickets)} with an older "
        f"event after a newer one, {len(run.lawyer_tickets)} escalated, "
        f"{len(run.stale_tickets)} made stale) and {len(demo & set(tickets))} demo tickets "
        f"drafted after the stale scan reminded them; every item of each final; last items "
        f"sent {final['sent']}, ignored {final['ignored']} (notify acknowledged "
        f"{final['notify']}), withdrawn {final['withdrawn']}, failed {final['failed']}; "
        f"not final {len(bad)}{_some(bad, 8)}"
        f"{'; items for unknown tickets' + _some(unexpected) if unexpected else ''}",
    )


def open_items(run: Run, items: list[dict[str, Any]]) -> Line:
    """Nothing is left waiting, redrafting or sending: the reviewer decided all it saw."""
    statuses = Counter(i["status"] for i in items)
    stuck = [f"{i['id']}={i['status']}" for i in items if i["status"] in OPEN]
    listed = ", ".join(f"{s} {statuses[s]}" for s in (*TERMINAL, *OPEN) if statuses[s])
    return (
        not stuck and not run.held,
        "no open item",
        f"{len(items)} items ({listed}); left waiting, redrafting or sending "
        f"{len(stuck)}{_some(stuck)}; tickets still held {len(run.held)}",
    )


def outbox(
    run: Run,
    items: list[dict[str, Any]],
    rows: list[Any],
    results: list[Result],
    channel_keys: list[str],
    refused: int,
) -> Line:
    """One outbox row per approval; delivered rows = reply.sent = what the channel took."""
    approved, overtaken = approvals(items)
    keys = [r.key for r in rows]
    delivery = Counter(r.delivery for r in rows)
    delivered = {r.key for r in rows if r.delivery == "delivered"}
    unsettled = sorted(
        r.key for r in rows if r.delivery not in ("delivered", "withdrawn", "failed")
    )
    sent_ids = [r.id for r in results if r.type == "reply.sent"]
    dup_keys = len(keys) - len(set(keys))
    dup_ids = len(sent_ids) - len(set(sent_ids))
    took = set(channel_keys)
    missing, extra = sorted(delivered - took), sorted(took - delivered)
    holds = (
        len(rows) == len(approved)
        and dup_keys == 0
        and dup_ids == 0
        and len(set(sent_ids)) == len(delivered)
        and not unsettled
        and not missing
        and not extra
    )
    return (
        holds,
        "outbox",
        f"rows {len(rows)} = accepted+edited decisions {len(approved)} (reviewer posted accept "
        f"{run.decisions['accept']}, edit {run.decisions['edit']}; overtaken by a redraft "
        f"{len(overtaken)}{_some(overtaken)}): delivered "
        f"{delivery['delivered']}, withdrawn {delivery['withdrawn']}, failed "
        f"{delivery['failed']}, unsettled {len(unsettled)}{_some(unsettled)}; duplicate keys "
        f"{dup_keys}; reply.sent events {len(set(sent_ids))} for {len(delivered)} delivered "
        f"rows, duplicate ids {dup_ids}; channel calls 200 {len(channel_keys)} for {len(took)} "
        f"keys, 503 {refused}; delivered rows the channel never took {len(missing)}"
        f"{_some(missing)}; keys the channel took that are not delivered rows {len(extra)}"
        f"{_some(extra)}",
    )


def one_reply_per_round(results: list[Result]) -> Line:
    """At most one reply.sent per (ticket, round)."""
    sent = Counter(r.round for r in unique(results, "reply.sent"))
    twice = [f"{t}/{r}×{n}" for (t, r), n in sent.items() if n > 1]
    per_ticket = Counter(t for t, _ in sent)
    several = [t for t, n in per_ticket.items() if n > 1]
    return (
        not twice,
        "one reply per round",
        f"{sum(sent.values())} reply.sent for {len(sent)} (ticket, round) pairs on "
        f"{len(per_ticket)} tickets; more than one for a round {len(twice)}{_some(twice)}; "
        f"tickets answered in two rounds or more {len(several)} (most "
        f"{max(per_ticket.values(), default=0)})",
    )


def approved_rounds(items: list[dict[str, Any]], results: list[Result]) -> Line:
    """Every approved round ends in exactly one of reply.sent / reply.withdrawn / reply.failed."""
    decided, overtaken = approvals(items)
    approved = Counter(_key(i) for i in decided)
    endings: dict[str, set[str]] = defaultdict(set)
    for kind in ENDINGS:
        for r in unique(results, kind):
            endings[str(r.data.get("outbox_key") or r.id.split(":", 1)[-1])].add(kind)
    none = sorted(k for k in approved if not endings.get(k))
    many = sorted(f"{k}:{'+'.join(sorted(v))}" for k, v in endings.items() if len(v) > 1)
    twice = sorted(k for k, n in approved.items() if n > 1)
    orphan = sorted(k for k in endings if k not in approved)
    ended = Counter(next(iter(v)) for k, v in endings.items() if len(v) == 1 and k in approved)
    return (
        not none and not many and not twice and not orphan,
        "approved rounds",
        f"{len(approved)} approved rounds (approvals a redraft overtook, not counted: "
        f"{len(overtaken)}): sent {ended['reply.sent']}, withdrawn "
        f"{ended['reply.withdrawn']}, failed {ended['reply.failed']}; without an ending "
        f"{len(none)}{_some(none)}; with more than one {len(many)}{_some(many)}; approved twice "
        f"{len(twice)}{_some(twice)}; endings without an approval {len(orphan)}{_some(orphan)}",
    )


def nothing_sent_withdrawn(
    run: Run,
    items: list[dict[str, Any]],
    rows: list[Any],
    results: list[Result],
    channel_keys: list[str],
    decided_at: dict[str, dt.datetime],
) -> Line:
    """No reply.sent for a withdrawn round; no delivery of a key whose ticket was closed (or
    answered by a person) before the key's decision."""
    withdrawn = {
        r.round for kind in ("item.withdrawn", "reply.withdrawn") for r in unique(results, kind)
    }
    sent_withdrawn = sorted(
        f"{t}/{r}" for t, r in {x.round for x in unique(results, "reply.sent")} & withdrawn
    )
    changed = {
        t.ticket: (t.kind, t.changed_at)
        for t in run.tasks
        if t.kind in ENDED and t.changed_at is not None
    }
    item_of = {r.key: r.item_id for r in rows}
    late = []
    for key in set(channel_keys):
        ticket = key.split("/", 1)[0]
        if ticket not in changed:
            continue
        kind, at = changed[ticket]
        decision = decided_at.get(item_of.get(key, ""))
        if decision is None or decision > at:
            late.append(f"{key} ({kind} {at:%H:%M:%S.%f}, decided {decision})")
    reasons = Counter(i.get("withdrawn_reason") or "?" for i in items if i["status"] == "withdrawn")
    return (
        not sent_withdrawn and not late,
        "nothing sent once withdrawn",
        f"item.withdrawn {len(unique(results, 'item.withdrawn'))}, reply.withdrawn "
        f"{len(unique(results, 'reply.withdrawn'))}; withdrawn items by reason "
        f"{dict(reasons) or '{}'}; reply.sent for a withdrawn round {len(sent_withdrawn)}"
        f"{_some(sent_withdrawn)}; delivered for a ticket closed or answered in the helpdesk "
        f"before the decision {len(late)}{_some(late, 3)} (of {len(changed)} such tickets)",
    )


def conversations(run: Run, items: list[dict[str, Any]], results: list[Result]) -> Line:
    """Each conversation step had the effect the product promises."""
    tickets = by_ticket(items)
    sent_rounds = {r.round for r in unique(results, "reply.sent")}
    problems = list(run.conversation_problems)
    count: Counter[str] = Counter()
    for task in run.tasks:
        count[f"{task.kind}:{task.step}"] += 1
        if task.step != "done":
            continue
        problem = _step_problem(task, tickets.get(task.ticket, []), sent_rounds, count)
        if problem:
            problems.append(f"{task.ticket} {task.kind}: {problem}")
        else:
            count[f"{task.kind}:ok"] += 1
    planned = Counter(task.kind for task in run.tasks)
    return (
        not problems,
        "conversations",
        f"second customer message while the draft waited {planned['again-waiting']} (superseded "
        f"by a version answering both {count['again-waiting:ok']}, sent "
        f"{count['again-waiting:sent']}); after the reply was sent {planned['again-after']} (a "
        f"new round {count['again-after:ok']}, sent {count['again-after:sent']}; skipped, the "
        f"first draft ignored {count['again-after:skipped']}); answered in the helpdesk "
        f"{planned['agent']} (withdrawn {count['agent:ok']}); closed while waiting "
        f"{planned['close']} (withdrawn {count['close:ok']}); closed just before its approval "
        f"{planned['close-approved']} (withdrawn {count['close-approved:ok']}: at delivery "
        f"{count['close-approved:approved']}, before the decision, 409 "
        f"{count['close-approved:refused']}); the customer wrote just before its approval "
        f"{planned['again-approved']} (withdrawn and answered in a new draft "
        f"{count['again-approved:ok']}: at delivery {count['again-approved:approved']}, before "
        f"the decision, 409 {count['again-approved:refused']}; new draft answering only the "
        f"newest message {count['again-approved:newest only']}); problems {len(problems)}"
        f"{_some(problems, 4)}",
    )


def _step_problem(
    task: Any,
    versions: list[dict[str, Any]],
    sent_rounds: set[tuple[str, str]],
    count: Counter[str],
) -> str | None:
    """What is wrong with the outcome of one conversation step, if anything."""
    before = next((v for v in versions if v["id"] == task.waiting_item), None)
    status, reason = (before or {}).get("status"), (before or {}).get("withdrawn_reason")
    if before is not None and (task.ticket, before.get("round") or "") in sent_rounds:
        return f"{before['id']} was sent after the step"
    if task.kind.endswith("-approved"):
        count[f"{task.kind}:{'approved' if task.approved else 'refused'}"] += 1
    answers: set[str] = set()
    if task.kind in CUSTOMER:
        newer = [v for v in versions if v.get("round") == task.round]
        if not newer:
            return f"no item for round {task.round}"
        answers = set(newer[0].get("round_messages") or [])
        if task.message_id not in answers:
            return f"round {task.round} answers {sorted(answers)}"
        if (task.ticket, task.round) in sent_rounds:
            count[f"{task.kind}:sent"] += 1
    opening = f"{task.ticket}-m1"
    if task.kind == "again-waiting":
        if answers != {opening, task.message_id} or status != "superseded":
            return f"{task.waiting_item} {status}; the new version answers {sorted(answers)}"
    elif task.kind == "again-after":
        if answers != {task.message_id}:
            return f"the new round answers {sorted(answers)}"
    elif task.kind == "again-approved":
        wanted = "withdrawn" if task.approved else "superseded"
        if status != wanted or (task.approved and reason != REASONS[task.kind]):
            return f"{task.waiting_item} {status} ({reason}), wanted {wanted}"
        if answers == {task.message_id}:
            count["again-approved:newest only"] += 1
    elif status != "withdrawn" or reason != REASONS[task.kind]:
        return f"{task.waiting_item} {status} ({reason})"
    return None


def stale_scans(run: Run, items: list[dict[str, Any]]) -> Line:
    """Two scans ran; a draft waiting at a scan was marked overdue and got no second item; a
    ticket answered before a scan got one follow-up; nobody was reminded twice in a day."""
    tickets = by_ticket(items)
    problems = [p for scan in run.scans for p in scan.problems]
    waited = overdue = second = 0
    followups = answered_sent = redrafted = answered_ignored = 0
    seen: Counter[tuple[str, dt.date]] = Counter()
    for scan in run.scans:
        seen.update((t, scan.day) for t in scan.reminded)
        for ticket in scan.waiting:
            if ticket not in scan.reminded:
                continue
            waited += 1
            overdue += ticket in scan.overdue
            extra = [i["id"] for i in tickets.get(ticket, []) if _trigger(i) == "ticket.stale"]
            if extra:
                second += 1
                problems.append(f"{ticket}: a waiting draft and a reminder item {extra}")
        for ticket, status in scan.answered.items():
            if ticket not in scan.reminded:
                continue
            rounds = [i for i in tickets.get(ticket, []) if _trigger(i) == "ticket.stale"]
            if status == "sent":
                answered_sent += 1
                made = {i["round"] for i in rounds if str(i.get("round")).startswith("followup-")}
                if len(made) == 1:
                    followups += 1
                else:
                    problems.append(f"{ticket}: answered, reminded, follow-up rounds {made}")
            elif status == "ignored":
                answered_ignored += 1
                redrafted += bool(rounds)
    twice = sorted(f"{t} {d}" for (t, d), n in seen.items() if n > 1)
    problems += [f"{t} reminded twice" for t in twice]
    replaced = []
    for versions in tickets.values():
        for old, new in itertools.pairwise(versions):
            if (
                old["status"] == "superseded"
                and old.get("decision") != "response"  # a redraft with the reviewer's feedback
                and _trigger(new) == "ticket.stale"
                and new.get("round") == old.get("round")
            ):
                replaced.append(old["id"])
    problems += [f"{i} superseded by a reminder" for i in replaced]
    demo = reminded_demo(run)
    drafted = {t for t in demo if tickets.get(t)}
    scans = ", ".join(
        f"#{s.number} after {s.faults_before} faults reminded {len(s.reminded)}" for s in run.scans
    )
    ran = len(run.scans) == 2 and all(s.ok for s in run.scans)
    return (
        ran and not problems and waited > 0 and overdue == waited,
        "stale scans",
        f"{len(run.scans)} scans ({scans}); drafts waiting at a scan {waited}: marked overdue "
        f"{overdue}, given a second item {second}; answered before a scan: sent {answered_sent} "
        f"→ one follow-up each {followups}, ignored {answered_ignored} → redrafted {redrafted}; "
        f"demo tickets reminded {len(demo)} (drafted {len(drafted)}); reminded twice in a day "
        f"{len(twice)}; superseded by a reminder {len(replaced)}; problems {len(problems)}"
        f"{_some(problems, 4)}",
    )
