"""The lines about items: every valid ticket has one and each is final; none is left open."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..facts import OPEN, TERMINAL, Run
from .evidence import Line, by_ticket, reminded_demo, some


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
        f"not final {len(bad)}{some(bad, 8)}"
        f"{'; items for unknown tickets' + some(unexpected) if unexpected else ''}",
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
        f"{len(stuck)}{some(stuck)}; tickets still held {len(run.held)}",
    )
