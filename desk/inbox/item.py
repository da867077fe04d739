"""`desk inbox show`: everything a reviewer needs to decide on one item, as text."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from .text import age, indented, one_line, when

AUTHORS = {"customer": "customer", "agent": "agent", "note": "internal note"}
TOLD = {"sla.near": "the team (nears its target)", "sla.past": "the team (past its target)"}


def _target(level: dict[str, Any]) -> str:
    """`past: due 2026-12-02 14:05 UTC`, `near: due …`, `due …` (in time), or `met`."""
    due = f"due {when(level['due_at'])}" if level.get("due_at") else "no target"
    standing = level.get("standing")
    if standing in ("past", "near"):
        return f"{standing}: {due}"
    return due if standing == "ok" else f"{due} (no longer waiting)"


def render_item(item: dict[str, Any], now: dt.datetime | None = None) -> str:
    """Everything a reviewer needs to decide on one item."""
    request = item.get("action_request") or {}
    action_args: dict[str, Any] = dict(request.get("args") or {})
    trigger = item.get("trigger") or {}
    config = item.get("config") or {}
    allowed = [
        kind
        for kind, flag in (
            ("accept", "allow_accept"),
            ("edit", "allow_edit"),
            ("respond", "allow_respond"),
            ("ignore", "allow_ignore"),
        )
        if config.get(flag)
    ]
    created = item.get("created_at")
    waiting = item.get("status") == "waiting"
    status = str(item.get("status")) + (f" ({item['decision']})" if item.get("decision") else "")
    if item.get("withdrawn_reason"):
        status += f": {item['withdrawn_reason']}"
    customer = item.get("customer") or {}
    ticket = " ".join(
        str(part)
        for part in (
            item.get("ticket_id") or "-",
            f"({item['ticket_status']})" if item.get("ticket_status") else "",
            item.get("ticket_url") or "",
        )
        if part
    )
    fields = [
        ("item", f"{item.get('id')}  (version {item.get('version')} of {item.get('thread')})"),
        ("status", status),
        ("customer", _customer(customer) if customer else "-"),
        ("ticket", ticket),
        ("priority", item.get("priority") or "-"),
        ("queue", item.get("queue") or "-"),
        *([("target", _target(item["service_level"]))] if item.get("service_level") else []),
        *(
            [("claimed", f"by {item['claim']['reviewer']} until {when(item['claim']['until'])}")]
            if item.get("claim")
            else []
        ),
        *([("overdue", f"since {item['overdue_since']}")] if item.get("overdue_since") else []),
        *([("cause", item["cause"])] if item.get("cause") else []),
        *(
            [("round", "a follow-up: the ticket waits on the customer")]
            if item.get("round_kind") == "followup"
            else []
        ),
        ("category", item.get("category") or "-"),
        ("summary", item.get("summary") or "-"),
        ("trigger", " ".join(str(trigger.get(k, "")) for k in ("source", "type", "event_id"))),
        ("created", f"{when(created)} ({age(created, now)} ago)" if created else "-"),
        ("cost", _cost(item.get("cost") or {})),
        *(
            [("trace", f"{item['trace_id']} (desk trace {item['trace_id']})")]
            if item.get("trace_id")
            else []
        ),
        ("you may", ", ".join(allowed) if waiting else f"nothing, it is {item.get('status')}"),
    ]
    lines = [f"{name + ':':<10}{one_line(value)}" for name, value in fields]
    for n in item.get("notifications") or []:
        how = f"via {one_line(n.get('channel') or 'log')} at {when(n.get('at'))}"
        whom = TOLD.get(n.get("about") or "", "a supervisor")
        if n.get("type") == "notify.sent":
            lines.append(f"{'notified:':<10}{whom}, {how}")
        else:
            lines.append(f"{'notified:':<10}FAILED to notify {whom}, {how}")
    if item.get("result"):
        lines.append(f"{'result:':<10}{one_line(json.dumps(item['result'], ensure_ascii=False))}")
    if item.get("warnings"):
        lines.append("warnings:")
        lines.extend(f"  ! {one_line(w)}" for w in item["warnings"])
    if item.get("feedback"):
        lines.append("feedback this draft answers:")
        lines.extend(indented(f, "  - ") for f in item["feedback"])
    if item.get("description"):
        lines.append("description:")
        lines.append(indented(item["description"]))
    lines.extend(_conversation(item.get("conversation") or [], item.get("round_messages") or []))
    reply = action_args.pop("reply", None)
    lines.append(f"action: {one_line(request.get('action'))}")
    for key, value in action_args.items():
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        lines.append(f"  {one_line(key)}: {one_line(shown)}")
    if reply is not None:
        lines.append("draft reply:")
        lines.append(indented(str(reply)) if str(reply).strip() else "  (empty)")
    citations = [c for c in item.get("citations") or [] if isinstance(c, dict)]
    if citations:
        lines.append("knowledge this draft relies on:")
        for c in citations:
            where = " · ".join(one_line(c.get(k)) for k in ("title", "section") if c.get(k))
            link = f"  {one_line(c['url'])}" if c.get("url") else ""
            lines.append(f"  {one_line(c.get('article'))}: {where}{link}")
            lines.append(indented(str(c.get("passage") or ""), "    "))
    learned = [str(t) for t in item.get("instructions") or []]
    if learned:
        lines.append(f"standing instructions for {one_line(item.get('category'))} it was given:")
        lines += [f"  - {one_line(t)}" for t in learned]
    examples = [str(e) for e in item.get("examples") or []]
    if examples:
        lines.append("replies reviewers sent that it was shown: " + ", ".join(examples))
    decisions: list[dict[str, Any]] = item.get("decisions") or []
    earlier = [v for v in item.get("versions") or [] if v.get("version") != item.get("version")]
    if earlier:
        lines.append("other versions:")
        for v in earlier:
            lines.append(
                f"  v{v.get('version')}  {one_line(v.get('status'))}  {when(v.get('created_at'))}"
            )
            if v.get("reply"):
                lines.append(indented(str(v["reply"]), "    reply: "))
            for d in decisions:
                if d.get("version") == v.get("version") and d.get("feedback"):
                    lines.append(
                        indented(
                            str(d["feedback"]), f"    feedback ({one_line(d.get('reviewer'))}): "
                        )
                    )
    lines.append("decisions:" if decisions else "decisions: none yet")
    for d in decisions:
        lines.append(
            f"  v{d.get('version')}  {one_line(d.get('type'))} by {one_line(d.get('reviewer'))}"
            f"  {when(d.get('decided_at'))}"
        )
        if d.get("feedback"):
            lines.append(indented(str(d["feedback"]), "    feedback: "))
        elif d.get("type") == "edit" and d.get("final_text"):
            lines.append(indented(str(d["final_text"]), "    sent: "))
    claims: list[dict[str, Any]] = item.get("claims") or []
    if claims:
        lines.append("claims:")
    for c in claims:
        who, what = one_line(c.get("reviewer")), one_line(c.get("action"))
        if what == "expired":
            said = f"{who}'s claim ran out"
        else:
            said = f"{what} by {who}" + (
                f" from {one_line(c['previous'])}" if c.get("previous") else ""
            )
        lines.append(f"  {when(c.get('at'))}  {said}")
    return "\n".join(lines)


def _customer(customer: dict[str, Any]) -> str:
    name, email = customer.get("name") or "", customer.get("email") or ""
    return f"{name} <{email}>" if name and email else name or email or "-"


def _conversation(messages: list[dict[str, Any]], answered: list[str]) -> list[str]:
    """The conversation, oldest first; `>` marks the messages this draft answers."""
    if not messages:
        return ["conversation: none recorded"]
    count = f"{len(messages)} message{'s' if len(messages) != 1 else ''}"
    lines = [f"conversation ({count}, newest last; > marks what this draft answers):"]
    for m in messages:
        mark = m.get("id") in answered
        author = AUTHORS.get(str(m.get("author")), one_line(m.get("author")))
        lines.append(
            f"{'>' if mark else ' '} {author}  {one_line(m.get('author_name') or '-')}"
            f"  {when(m.get('created_at'))}" + ("  (this draft answers)" if mark else "")
        )
        body = str(m.get("body") or "")
        lines.append(indented(body, "    ") if body.strip() else "    (empty)")
    return lines


def _cost(cost: dict[str, Any]) -> str:
    tokens_in, tokens_out = cost.get("input_tokens", 0), cost.get("output_tokens", 0)
    usd = cost.get("usd", 0.0)
    if not (tokens_in or tokens_out or usd):
        return "none (no model call)"
    return f"{tokens_in} tokens in, {tokens_out} out, ${float(usd):.4f}"
