"""The line about the conversation steps: each had the effect the product promises."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..conversations import CUSTOMER, REASONS
from ..facts import Run
from .evidence import Line, Result, by_ticket, some, unique


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
        f"{some(problems, 4)}",
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
