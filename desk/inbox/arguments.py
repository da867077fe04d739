"""The `desk inbox` sub-commands and their options, on the `desk` parser."""

from __future__ import annotations

import argparse
from typing import Any

SORTS = ("oldest", "newest", "priority")
PRIORITIES = ("urgent", "high", "normal", "low")


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
