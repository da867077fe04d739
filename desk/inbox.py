"""`desk inbox`: the review inbox from a terminal, over the inbox API (HTTP, bearer token).

desk inbox list [--status S | --all] [--priority P] [--category C] [--source S] [--text T]
                [--queue Q] [--mine] [--sort oldest|newest|priority] [--limit N] [--cursor C]
                                    a table of items (default: waiting; overdue and those
                                    near or past their target first, then oldest first)
desk inbox show ID                  the item: the customer, the ticket, status and priority,
                                    the conversation (what the draft answers marked), the
                                    draft, earlier versions with their feedback, decisions
desk inbox accept ID                send the draft as it is
desk inbox edit ID TEXT             send TEXT instead of the drafted reply ("-": read stdin)
desk inbox respond ID TEXT          ask for a new draft with TEXT as feedback ("-": stdin)
desk inbox ignore ID                close the item, send nothing

Every sub-command takes `--url` (default: env `DESK_INBOX_URL`, else the running stack's
inbox_api from `var/stack.json`) and `--token` (default: env `DESK_TOKEN`, else the running
stack's development reviewer token). A decision first reads the item to learn the version it
decides on, so it never decides on a draft newer than the one the reviewer could have seen.

Exit status: 0 done; 1 the API refused (its status and error text on stderr) or could not be
reached; 2 no URL or token could be found.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from shared import clock

from .statefile import STATE_FILE

WIDTH = 100
TIMEOUT = 10.0
SORTS = ("oldest", "newest", "priority")
PRIORITIES = ("urgent", "high", "normal", "low")
AUTHORS = {"customer": "customer", "agent": "agent", "note": "internal note"}
CREDENTIALS_FILE = "dev-credentials.json"
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # keeps \t and \n
_DONE = {
    "accept": "accepted",
    "edit": "edited",
    "response": "sent feedback on",
    "ignore": "ignored",
}


class InboxError(Exception):
    """A one-line message for stderr; `code` is the exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


# -- arguments ---------------------------------------------------------------------------------


def _connection_options(parser: argparse.ArgumentParser, default: Any) -> None:
    parser.add_argument(
        "--url",
        default=default,
        help="inbox API base URL (default: $DESK_INBOX_URL, else the running stack's)",
    )
    parser.add_argument(
        "--token",
        default=default,
        help="reviewer token (default: $DESK_TOKEN, else the running stack's dev token)",
    )


def add_arguments(subparsers: Any) -> None:
    """Register `inbox` and its sub-commands on the `desk` parser's sub-parsers."""
    inbox = subparsers.add_parser("inbox", help="list, show and decide review-inbox items")
    _connection_options(inbox, None)
    sub = inbox.add_subparsers(dest="inbox_command", required=True, metavar="command")

    def command(name: str, help: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = sub.add_parser(name, help=help)
        # also accepted after the sub-command; SUPPRESS keeps a value given before it
        _connection_options(parser, argparse.SUPPRESS)
        return parser

    listing = command("list", help="a table of items (default: waiting, oldest first)")
    which = listing.add_mutually_exclusive_group()
    which.add_argument("--status", default="waiting", help="only this status (default waiting)")
    which.add_argument("--all", action="store_true", help="every status")
    listing.add_argument("--priority", choices=PRIORITIES, help="only this priority")
    listing.add_argument("--category", help="only this category")
    listing.add_argument("--source", help="only items triggered by this source")
    listing.add_argument("--text", help="search summary, description and ticket id")
    listing.add_argument("--queue", help="only this queue")
    listing.add_argument(
        "--mine", action="store_true", help="only your queues' items and those you have claimed"
    )
    listing.add_argument(
        "--sort",
        default="oldest",
        choices=SORTS,
        help="oldest (default) or newest first, or by priority (urgent first)",
    )
    listing.add_argument("--limit", type=int, default=50, help="at most N rows (default 50)")
    listing.add_argument("--cursor", help="the next page (as printed under the table)")
    command(
        "show", help="one item: customer, ticket, conversation, draft, versions, decisions"
    ).add_argument("id")
    accept = command("accept", help="send the draft as it is")
    edit = command("edit", help="send your text instead of the drafted reply")
    respond = command("respond", help="ask for a new draft, with feedback")
    ignore = command("ignore", help="close the item without sending anything")
    claim = command("claim", help="claim an item (or renew your claim): others see it is yours")
    for parser in (accept, edit, respond, ignore, claim):
        parser.add_argument("id")
        parser.add_argument(
            "--take-over",
            action="store_true",
            help="take the item from the reviewer who has claimed it",
        )
    edit.add_argument("text", help='the reply to send ("-" reads it from stdin)')
    respond.add_argument("text", help='the feedback ("-" reads it from stdin)')
    command("release", help="let go of your claim on an item").add_argument("id")


# -- entry point -------------------------------------------------------------------------------


def main(args: argparse.Namespace, var_dir: Path) -> int:
    command = args.inbox_command
    try:
        url, token = connection(args, var_dir)
        with Client(url, token) as client:
            if command == "list":
                print(_list(client, args))
            elif command == "show":
                print(render_item(client.item(args.id)))
            elif command in ("accept", "edit", "respond", "ignore"):
                print(
                    _decide(client, command, args.id, getattr(args, "text", None), args.take_over)
                )
            elif command == "claim":
                held = client.claim(args.id, args.take_over)
                print(_clean(f"{args.id} is yours until {_when(held.get('until'))}"))
            elif command == "release":
                released = client.release(args.id)["released"]
                print(_clean(f"released {args.id}" if released else f"{args.id} was not yours"))
            else:
                raise InboxError(f"unknown command {command!r}", 2)
    except InboxError as exc:
        print(f"desk inbox {command}: {_clean(str(exc))}", file=sys.stderr)
        return exc.code
    return 0


def defaults(var_dir: Path) -> tuple[str | None, str | None]:
    """(inbox API URL, dev reviewer token) of the stack running from `var_dir`, where known."""
    url = token = None
    var_dir = Path(var_dir)
    creds_path = var_dir / CREDENTIALS_FILE
    try:
        state = json.loads((var_dir / STATE_FILE).read_text())
        url = state["services"]["inbox_api"]["url"]
        creds_path = Path(state.get("credentials") or creds_path)
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        token = json.loads(creds_path.read_text()).get("reviewer_token") or None
    except (OSError, ValueError, AttributeError):
        pass
    return url, token


def connection(args: argparse.Namespace, var_dir: Path) -> tuple[str, str]:
    """The URL and token to use: the options, then the environment, then the running stack."""
    url = getattr(args, "url", None) or os.environ.get("DESK_INBOX_URL")
    token = getattr(args, "token", None) or os.environ.get("DESK_TOKEN")
    if not url or not token:
        stack_url, stack_token = defaults(var_dir)
        url, token = url or stack_url, token or stack_token
    if not url:
        raise InboxError("no running stack found; pass --url or set DESK_INBOX_URL", 2)
    if not token:
        raise InboxError("no reviewer token found; pass --token or set DESK_TOKEN", 2)
    return url.rstrip("/"), token


# -- HTTP --------------------------------------------------------------------------------------


class Client:
    """The inbox API calls the CLI makes; every failure becomes an InboxError."""

    def __init__(self, url: str, token: str, timeout: float = TIMEOUT) -> None:
        self.url = url
        self._http = httpx.Client(
            base_url=url,
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
            timeout=timeout,
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()

    def items(self, params: dict[str, str]) -> dict[str, Any]:
        return self._call("GET", "/api/items", params=params)

    def item(self, item_id: str) -> dict[str, Any]:
        return self._call("GET", f"/api/items/{_path(item_id)}")

    def decide(self, item_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", f"/api/items/{_path(item_id)}/decision", json=body)

    def claim(self, item_id: str, take_over: bool = False) -> dict[str, Any]:
        body = {"take_over": take_over}
        return self._call("POST", f"/api/items/{_path(item_id)}/claim", json=body)

    def release(self, item_id: str) -> dict[str, Any]:
        return self._call("DELETE", f"/api/items/{_path(item_id)}/claim")

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        try:
            answer = self._http.request(method, path, **kwargs)
        except httpx.TimeoutException:
            raise InboxError(
                f"the inbox API at {self.url} did not answer within {self._http.timeout.read}s"
            ) from None
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise InboxError(
                f"cannot reach the inbox API at {self.url} ({exc.__class__.__name__});"
                " is the stack running (`desk status`)?"
            ) from None
        try:
            body = answer.json()
        except ValueError:
            body = None
        if answer.status_code >= 400:
            message = body.get("error") if isinstance(body, dict) else None
            raise InboxError(f"{answer.status_code} {message or answer.reason_phrase}".strip())
        if not isinstance(body, dict):
            raise InboxError(
                f"{self.url} answered {answer.status_code} without a JSON object;"
                " is it the inbox API?"
            )
        return body


def _path(item_id: str) -> str:
    return quote(item_id, safe="~")


# -- commands ----------------------------------------------------------------------------------


def _list(client: Client, args: argparse.Namespace) -> str:
    params = {"sort": args.sort, "limit": str(args.limit)}
    if not args.all and args.status:
        params["status"] = args.status
    for name in ("priority", "category", "source", "text", "queue", "cursor"):
        if getattr(args, name, None):
            params[name] = getattr(args, name)
    if args.mine:
        params["mine"] = "true"
    page = client.items(params)
    items: list[dict[str, Any]] = page.get("items") or []
    if not items:
        what = "items" if args.all else f"{args.status} items"
        return f"no {what}" + (" on this page" if args.cursor else "")
    lines = [render_table(items)]
    more = f"; next page: --cursor {page['next_cursor']}" if page.get("next_cursor") else ""
    lines.append(f"\n{len(items)} shown{more}")
    return "\n".join(lines)


def _decide(
    client: Client, command: str, item_id: str, text: str | None, take_over: bool = False
) -> str:
    if text == "-":
        text = sys.stdin.read()
    item = client.item(item_id)  # decide on the version the reviewer can see now
    version = item.get("version")
    if not isinstance(version, int):
        raise InboxError(f"{client.url} sent an item without a version")
    kind = {"respond": "response"}.get(command, command)
    args: Any = None
    if kind == "edit":
        request = item.get("action_request") or {}
        args = {
            "action": request.get("action"),
            "args": {**(request.get("args") or {}), "reply": text},
        }
    elif kind == "response":
        args = text
    body = {"type": kind, "args": args, "version": version, "take_over": take_over}
    answer = client.decide(item_id, body)
    done = f"{_DONE[kind]} {item.get('id', item_id)}"
    if answer.get("published") is False:
        done += " (recorded; it will be published when the event store is back)"
    return _clean(done)


# -- rendering ---------------------------------------------------------------------------------


def age(created_at: str | None, now: dt.datetime | None = None) -> str:
    """How long ago, in the largest whole unit: 12s, 4m, 2h, 3d."""
    if not created_at:
        return "-"
    try:
        then = clock.parse(created_at)
    except ValueError:
        return "?"
    seconds = max(0, int(((now or dt.datetime.now(dt.UTC)) - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def render_table(
    items: list[dict[str, Any]], now: dt.datetime | None = None, width: int = WIDTH
) -> str:
    """ID, AGE, STATUS, PRIORITY, CATEGORY, QUEUE (when some item has one), TICKET, SUMMARY;
    the summary of an item
    past or near its target starts with `[past target]` / `[due HH:MM]`, of an overdue one with
    `[overdue since DAY]`; the summary is cut to fit `width` columns."""
    queued = any(item.get("queue") for item in items)  # the QUEUE column only where it says
    header: tuple[str, ...] = (
        "ID",
        "AGE",
        "STATUS",
        "PRIORITY",
        "CATEGORY",
        "QUEUE",
        "TICKET",
        "SUMMARY",
    )
    rows: list[tuple[str, ...]] = [header]
    for item in items:
        overdue = item.get("overdue_since")
        summary = _one_line(item.get("summary"))
        level = item.get("service_level") or {}
        if level.get("standing") == "past":
            summary = f"[past target] {summary}"
        elif level.get("standing") == "near":
            summary = f"[due {_clock(level['due_at'])}] {summary}"
        rows.append(
            (
                _one_line(item.get("id")),
                age(item.get("created_at"), now),
                _one_line(item.get("status"))
                + (f" ({_one_line(item['claimed_by'])})" if item.get("claimed_by") else ""),
                _one_line(item.get("priority")),
                _one_line(item.get("category")),
                _one_line(item.get("queue")),
                _one_line(item.get("ticket_id")),
                f"[overdue since {_one_line(overdue)}] {summary}" if overdue else summary,
            )
        )
    if not queued:
        rows = [row[:5] + row[6:] for row in rows]
        header = rows[0]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    room = max(20, width - sum(widths) - 2 * (len(header) - 1))
    return "\n".join(
        "  ".join(
            [*(c.ljust(w) for c, w in zip(row, widths, strict=False)), _cut(row[-1], room)]
        ).rstrip()
        for row in rows
    )


TOLD = {"sla.near": "the team (nears its target)", "sla.past": "the team (past its target)"}


def _target(level: dict[str, Any]) -> str:
    """`past: due 2026-12-02 14:05 UTC`, `near: due …`, `due …` (in time), or `met`."""
    due = f"due {_when(level['due_at'])}" if level.get("due_at") else "no target"
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
            [("claimed", f"by {item['claim']['reviewer']} until {_when(item['claim']['until'])}")]
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
        ("created", f"{_when(created)} ({age(created, now)} ago)" if created else "-"),
        ("cost", _cost(item.get("cost") or {})),
        *(
            [("trace", f"{item['trace_id']} (desk trace {item['trace_id']})")]
            if item.get("trace_id")
            else []
        ),
        ("you may", ", ".join(allowed) if waiting else f"nothing, it is {item.get('status')}"),
    ]
    lines = [f"{name + ':':<10}{_one_line(value)}" for name, value in fields]
    for n in item.get("notifications") or []:
        how = f"via {_one_line(n.get('channel') or 'log')} at {_when(n.get('at'))}"
        whom = TOLD.get(n.get("about") or "", "a supervisor")
        if n.get("type") == "notify.sent":
            lines.append(f"{'notified:':<10}{whom}, {how}")
        else:
            lines.append(f"{'notified:':<10}FAILED to notify {whom}, {how}")
    if item.get("result"):
        lines.append(f"{'result:':<10}{_one_line(json.dumps(item['result'], ensure_ascii=False))}")
    if item.get("warnings"):
        lines.append("warnings:")
        lines.extend(f"  ! {_one_line(w)}" for w in item["warnings"])
    if item.get("feedback"):
        lines.append("feedback this draft answers:")
        lines.extend(_indented(f, "  - ") for f in item["feedback"])
    if item.get("description"):
        lines.append("description:")
        lines.append(_indented(item["description"]))
    lines.extend(_conversation(item.get("conversation") or [], item.get("round_messages") or []))
    reply = action_args.pop("reply", None)
    lines.append(f"action: {_one_line(request.get('action'))}")
    for key, value in action_args.items():
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        lines.append(f"  {_one_line(key)}: {_one_line(shown)}")
    if reply is not None:
        lines.append("draft reply:")
        lines.append(_indented(str(reply)) if str(reply).strip() else "  (empty)")
    citations = [c for c in item.get("citations") or [] if isinstance(c, dict)]
    if citations:
        lines.append("knowledge this draft relies on:")
        for c in citations:
            where = " · ".join(_one_line(c.get(k)) for k in ("title", "section") if c.get(k))
            link = f"  {_one_line(c['url'])}" if c.get("url") else ""
            lines.append(f"  {_one_line(c.get('article'))}: {where}{link}")
            lines.append(_indented(str(c.get("passage") or ""), "    "))
    learned = [str(t) for t in item.get("instructions") or []]
    if learned:
        lines.append(f"standing instructions for {_one_line(item.get('category'))} it was given:")
        lines += [f"  - {_one_line(t)}" for t in learned]
    examples = [str(e) for e in item.get("examples") or []]
    if examples:
        lines.append("replies reviewers sent that it was shown: " + ", ".join(examples))
    decisions: list[dict[str, Any]] = item.get("decisions") or []
    earlier = [v for v in item.get("versions") or [] if v.get("version") != item.get("version")]
    if earlier:
        lines.append("other versions:")
        for v in earlier:
            lines.append(
                f"  v{v.get('version')}  {_one_line(v.get('status'))}  {_when(v.get('created_at'))}"
            )
            if v.get("reply"):
                lines.append(_indented(str(v["reply"]), "    reply: "))
            for d in decisions:
                if d.get("version") == v.get("version") and d.get("feedback"):
                    lines.append(
                        _indented(
                            str(d["feedback"]), f"    feedback ({_one_line(d.get('reviewer'))}): "
                        )
                    )
    lines.append("decisions:" if decisions else "decisions: none yet")
    for d in decisions:
        lines.append(
            f"  v{d.get('version')}  {_one_line(d.get('type'))} by {_one_line(d.get('reviewer'))}"
            f"  {_when(d.get('decided_at'))}"
        )
        if d.get("feedback"):
            lines.append(_indented(str(d["feedback"]), "    feedback: "))
        elif d.get("type") == "edit" and d.get("final_text"):
            lines.append(_indented(str(d["final_text"]), "    sent: "))
    claims: list[dict[str, Any]] = item.get("claims") or []
    if claims:
        lines.append("claims:")
    for c in claims:
        who, what = _one_line(c.get("reviewer")), _one_line(c.get("action"))
        if what == "expired":
            said = f"{who}'s claim ran out"
        else:
            said = f"{what} by {who}" + (
                f" from {_one_line(c['previous'])}" if c.get("previous") else ""
            )
        lines.append(f"  {_when(c.get('at'))}  {said}")
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
        author = AUTHORS.get(str(m.get("author")), _one_line(m.get("author")))
        lines.append(
            f"{'>' if mark else ' '} {author}  {_one_line(m.get('author_name') or '-')}"
            f"  {_when(m.get('created_at'))}" + ("  (this draft answers)" if mark else "")
        )
        body = str(m.get("body") or "")
        lines.append(_indented(body, "    ") if body.strip() else "    (empty)")
    return lines


def _clock(stamp: str) -> str:
    """An ISO timestamp as `14:05 UTC`."""
    try:
        when = clock.parse(stamp)
    except ValueError:
        return _one_line(stamp)
    return f"{when.astimezone(dt.UTC):%H:%M} UTC"


def _when(stamp: str | None) -> str:
    """An ISO timestamp as `2025-01-02 10:04:05 UTC`."""
    if not stamp:
        return "-"
    try:
        when = clock.parse(stamp)
    except ValueError:
        return _one_line(stamp)
    return when.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _cost(cost: dict[str, Any]) -> str:
    tokens_in, tokens_out = cost.get("input_tokens", 0), cost.get("output_tokens", 0)
    usd = cost.get("usd", 0.0)
    if not (tokens_in or tokens_out or usd):
        return "none (no model call)"
    return f"{tokens_in} tokens in, {tokens_out} out, ${float(usd):.4f}"


def _indented(text: str, first: str = "  ") -> str:
    """Multi-line text under a heading, each line cleaned and indented like the first."""
    rest = " " * len(first)
    lines = _clean(text.strip("\n")).splitlines() or [""]
    return "\n".join((first if i == 0 else rest) + line for i, line in enumerate(lines))


def _one_line(value: Any) -> str:
    if value is None:
        return "-"
    return _clean(" ".join(str(value).split()))


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _clean(text: str) -> str:
    """Show control characters (terminal escapes from outside) as `\\xNN`, never run them."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


__all__ = [
    "Client",
    "InboxError",
    "add_arguments",
    "age",
    "connection",
    "defaults",
    "main",
    "render_item",
    "render_table",
]
