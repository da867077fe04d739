"""The report: one PASS/FAIL line per invariant (the conversation ones from chaos/rounds/),
then an INFO line of counts."""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

from services.sender import read_outbox
from shared.deadletters import DeadLetter
from standins.channel import FakeChannel

from .. import rounds
from ..facts import Run
from ..rounds import Line
from .faults import planned
from .observation import (
    all_items,
    consumers,
    dead_letters,
    decision_times,
    redeliveries,
    replication,
    results,
)

TICKET_RE = re.compile(r"T\d{4,}")


def retried(var: Path, msg_id: str) -> bool:
    """Whether any service logged a retry (nak) of the message `msg_id` (prefix match)."""
    if not msg_id:
        return True
    for path in (var / "log").glob("*.log"):
        with open(path, errors="replace") as f:
            for line in f:
                if msg_id in line and "retrying" in line:
                    return True
    return False


def report(run: Run, admin_url: str, channel: FakeChannel, quiescent: bool, started: float) -> bool:
    """Print one PASS/FAIL line per invariant and the INFO line; whether every invariant held."""
    lines: list[Line] = []
    items = all_items(run)
    rows = read_outbox(run.database_url, run.var)
    stored = rounds.results_of(asyncio.run(results(admin_url)))
    took = channel.delivered()

    # 1-2. every valid ticket's items final; nothing left open
    lines.append(rounds.terminal(run, items))
    lines.append(rounds.open_items(run, items))
    # 3. outbox = accepted + edited; delivered rows = reply.sent = what the channel took
    lines.append(rounds.outbox(run, items, rows, stored, took, channel.refused))
    # 4-7. conversations: one reply per round, one ending per approved round, nothing sent
    # once withdrawn, every conversation step and stale scan did what it should
    lines.append(rounds.one_reply_per_round(stored))
    lines.append(rounds.approved_rounds(items, stored))
    lines.append(rounds.nothing_sent_withdrawn(run, items, rows, stored, took, decision_times(run)))
    lines.append(rounds.conversations(run, items, stored))
    lines.append(rounds.stale_scans(run, items))
    # 8. dead letters = exactly the nonexistent tickets, one attempt each
    lines.append(dead_letters_line(run, asyncio.run(dead_letters(admin_url))))
    # 9. nothing pending in any consumer
    lines.append(drained_line(asyncio.run(consumers(admin_url)), quiescent))
    redelivered = redelivery_counts(run, admin_url)
    # 10. every re-sent event was answered duplicate:true
    lines.append(duplicates_line(run))
    # 11. every planned fault was injected and recovered from
    lines.append(faults_line(run))
    # 12. in a cluster: every stream kept three replicas and the restarted node caught up
    if run.cluster:
        lines.append(replicas_line(admin_url))

    for good, name, text in lines:
        print(f"{'PASS' if good else 'FAIL'} {name}: {text}", flush=True)
    print(info_line(run, redelivered, started), flush=True)
    return all(good for good, _, _ in lines)


def dead_letters_line(run: Run, letters: list[DeadLetter]) -> Line:
    named: Counter[str] = Counter()
    other: list[str] = []
    attempts_bad: list[str] = []
    interrupted: list[str] = []
    for letter in letters:
        found = set(TICKET_RE.findall(letter.payload)) | set(TICKET_RE.findall(letter.error))
        hit = found & run.missing_tickets
        if len(hit) == 1:
            tid = hit.pop()
            named[tid] += 1
            if letter.attempts != 1:
                # a delivery cut short by a SIGKILL or a broker restart is redelivered without
                # any retry decision; only a logged retry of this message breaks the invariant
                if retried(run.var, letter.original_msg_id or ""):
                    attempts_bad.append(f"{tid}:{letter.attempts} (retried)")
                else:
                    interrupted.append(f"{tid}:{letter.attempts}")
        else:
            other.append(f"#{letter.id} {letter.service} {letter.reason}: {letter.error[:80]}")
    missing_no_letter = sorted(run.missing_tickets - set(named))
    twice = sorted(t for t, n in named.items() if n > 1)
    return (
        not other and not missing_no_letter and not twice and not attempts_bad,
        "dead letters",
        f"{len(letters)} dead letters for {len(run.missing_tickets)} nonexistent tickets; "
        f"without a letter {len(missing_no_letter)} {missing_no_letter[:5]}; more than one "
        f"{twice[:5]}; retried before the letter {attempts_bad[:5]}; redelivered after an "
        f"interrupted first delivery (no retry logged) {interrupted[:5]}; "
        f"other letters {len(other)}"
        f"{' ' + ' | '.join(other[:3]) if other else ''}",
    )


def drained_line(infos: dict[str, Any], quiescent: bool) -> Line:
    pending = {
        k: (c.num_pending, c.num_ack_pending)
        for k, c in infos.items()
        if (c.num_pending or 0) or (c.num_ack_pending or 0)
    }
    return (
        not pending,
        "consumers drained",
        f"{len(infos)} consumers; with pending/ack-pending {pending or 'none'}; "
        f"quiescent before the deadline: {quiescent}",
    )


def redelivery_counts(run: Run, admin_url: str) -> str:
    """Redeliveries per consumer, for the INFO line."""
    try:
        per_consumer = asyncio.run(redeliveries(admin_url))
        redelivered = (
            f"{sum(per_consumer.values())} {dict((k, v) for k, v in per_consumer.items() if v)}"
        )
    except Exception as exc:
        redelivered = f"unknown ({exc.__class__.__name__}: {exc})"
    return redelivered + f", peak num_redelivered seen {run.peak_redelivered}"


def duplicates_line(run: Run) -> Line:
    return (
        run.planned_dups > 0 and not run.dup_wrong,
        "duplicates",
        f"{run.planned_dups} re-sent events, {run.dup_answers} answered duplicate:true, "
        f"{len(run.dup_wrong)} answered as new {run.dup_wrong[:5]}",
    )


def faults_line(run: Run) -> Line:
    return (
        len(run.faults) == len(planned(run)) and not run.fault_problems,
        "faults",
        f"{len(run.faults)} injected: {', '.join(run.faults)}"
        f"{'; problems: ' + '; '.join(run.fault_problems) if run.fault_problems else ''}",
    )


def replicas_line(admin_url: str) -> Line:
    deadline = time.monotonic() + 30  # a restarted peer may still be catching up
    streams = asyncio.run(replication(admin_url))
    while any(v != "R3" for v in streams.values()) and time.monotonic() < deadline:
        time.sleep(1.0)
        streams = asyncio.run(replication(admin_url))
    listed = ", ".join(f"{k} {v}" for k, v in sorted(streams.items()))
    return (
        bool(streams) and all(v == "R3" for v in streams.values()),
        "replicas",
        f"{len(streams)} streams: {listed}",
    )


def info_line(run: Run, redelivered: str, started: float) -> str:
    return (
        f"INFO counts: events in {run.sends} ({run.conversation_sends} of them conversation and "
        f"stale-ticket webhooks; HTTP attempts {run.http_attempts}, refused or "
        f"unreachable {sum(run.send_errors.values())} {dict(run.send_errors)}); duplicates "
        f"dropped {run.dup_answers + run.first_dup} (planned {run.planned_dups}, retried sends "
        f"{run.first_dup}); redeliveries {redelivered}; decisions {dict(run.decisions)}, "
        f"409s {run.decision_conflicts}, errors {dict(run.decision_errors)}; faults "
        f"{len(run.faults)}; broker "
        f"{'a three-node cluster, R3 streams' if run.cluster else 'one nats-server'}; "
        f"database {'PostgreSQL' if run.database_url else 'SQLite'}; "
        f"wall time {time.monotonic() - started:.0f}s"
    )
