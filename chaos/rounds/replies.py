"""The lines about replies: one outbox row per approval, one reply per round, one ending per
approved round, nothing sent once withdrawn."""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict
from typing import Any

from ..conversations import ENDED
from ..facts import Run
from .evidence import Line, Result, approvals, outbox_key, some, unique

ENDINGS = ("reply.sent", "reply.withdrawn", "reply.failed")


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
        f"{len(overtaken)}{some(overtaken)}): delivered "
        f"{delivery['delivered']}, withdrawn {delivery['withdrawn']}, failed "
        f"{delivery['failed']}, unsettled {len(unsettled)}{some(unsettled)}; duplicate keys "
        f"{dup_keys}; reply.sent events {len(set(sent_ids))} for {len(delivered)} delivered "
        f"rows, duplicate ids {dup_ids}; channel calls 200 {len(channel_keys)} for {len(took)} "
        f"keys, 503 {refused}; delivered rows the channel never took {len(missing)}"
        f"{some(missing)}; keys the channel took that are not delivered rows {len(extra)}"
        f"{some(extra)}",
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
        f"{len(per_ticket)} tickets; more than one for a round {len(twice)}{some(twice)}; "
        f"tickets answered in two rounds or more {len(several)} (most "
        f"{max(per_ticket.values(), default=0)})",
    )


def approved_rounds(items: list[dict[str, Any]], results: list[Result]) -> Line:
    """Every approved round ends in exactly one of reply.sent / reply.withdrawn / reply.failed."""
    decided, overtaken = approvals(items)
    approved = Counter(outbox_key(i) for i in decided)
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
        f"{len(none)}{some(none)}; with more than one {len(many)}{some(many)}; approved twice "
        f"{len(twice)}{some(twice)}; endings without an approval {len(orphan)}{some(orphan)}",
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
        f"{some(sent_withdrawn)}; delivered for a ticket closed or answered in the helpdesk "
        f"before the decision {len(late)}{some(late, 3)} (of {len(changed)} such tickets)",
    )
