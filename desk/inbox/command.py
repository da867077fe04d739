"""Each `desk inbox` sub-command run: list, show, decide, claim and release."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .client import Client
from .endpoint import connection
from .errors import InboxError
from .item import render_item
from .table import render_table
from .text import clean, when

_DONE = {
    "accept": "accepted",
    "edit": "edited",
    "response": "sent feedback on",
    "ignore": "ignored",
}


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
                print(clean(f"{args.id} is yours until {when(held.get('until'))}"))
            elif command == "release":
                released = client.release(args.id)["released"]
                print(clean(f"released {args.id}" if released else f"{args.id} was not yours"))
            else:
                raise InboxError(f"unknown command {command!r}", 2)
    except InboxError as exc:
        print(f"desk inbox {command}: {clean(str(exc))}", file=sys.stderr)
        return exc.code
    return 0


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
    return clean(done)
