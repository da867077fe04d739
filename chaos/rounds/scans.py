"""The line about the stale scans: overdue drafts marked, answered tickets followed up once."""

from __future__ import annotations

import datetime as dt
import itertools
from collections import Counter
from typing import Any

from ..facts import Run
from .evidence import Line, by_ticket, reminded_demo, some, trigger


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
            extra = [i["id"] for i in tickets.get(ticket, []) if trigger(i) == "ticket.stale"]
            if extra:
                second += 1
                problems.append(f"{ticket}: a waiting draft and a reminder item {extra}")
        for ticket, status in scan.answered.items():
            if ticket not in scan.reminded:
                continue
            rounds = [i for i in tickets.get(ticket, []) if trigger(i) == "ticket.stale"]
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
                and trigger(new) == "ticket.stale"
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
        f"{some(problems, 4)}",
    )
