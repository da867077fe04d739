"""`desk send-webhook`: a sample event, signed and sent to ingress as a helpdesk (or the mail
source) would send it; the ticket's own priority unless `--priority`."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from shared.settings import ConfigError, DeskSettings


def add_arguments(subparsers: Any) -> None:
    """Register `send-webhook` on the `desk` parser's sub-parsers."""
    send = subparsers.add_parser("send-webhook", help="sign and send a sample event to ingress")
    send.add_argument(
        "--source", default="helpdesk", help="helpdesk (ticket events) or email (inbound mail)"
    )
    send.add_argument("--type", default="ticket.created", dest="event_type")
    send.add_argument("--ticket", default="T1012")
    send.add_argument(
        "--priority",
        choices=["low", "normal", "high", "urgent"],
        help="default: the ticket's own, read from the helpdesk",
    )
    send.add_argument("--id", dest="event_id", help="event id (default: a new one)")
    send.add_argument("--repeat", type=int, default=1, help="send the same event N times")
    send.add_argument("--scheme", choices=["standard", "stripe", "github"], default="standard")
    send.add_argument("--url", help="ingress base URL (default: the running stack's)")
    send.add_argument("--secret", help="signing secret (default: the stack's dev secret)")


def main(args: argparse.Namespace) -> int:
    from .webhook import MAIL_SOURCE, SendError, defaults, sample_event, sample_mail, send

    url, secret, known = defaults(DeskSettings().var_dir.resolve(), args.source)
    if url and not secret and not args.secret:
        print(
            f"desk send-webhook: the running stack has no secret for source {args.source!r} "
            f"(its sources: {', '.join(known) or 'none'}); pass --secret",
            file=sys.stderr,
        )
        return 2
    url, secret = args.url or url, args.secret or secret
    if not url or not secret:
        print(
            "desk send-webhook: no running stack found; pass --url and --secret",
            file=sys.stderr,
        )
        return 2
    if args.source == MAIL_SOURCE:
        event = sample_mail(args.event_id)
    else:
        priority = args.priority or _ticket_priority(args.ticket)
        event = sample_event(args.event_type, args.ticket, priority, args.event_id)
    try:
        answers = send(
            url=url,
            source=args.source,
            secret=secret,
            scheme=args.scheme,
            event=event,
            repeat=max(1, args.repeat),
        )
    except SendError as exc:
        print(f"desk send-webhook: {exc}", file=sys.stderr)
        return 1
    for status, body in answers:
        print(status, body)
    return 0 if all(status == 202 for status, _ in answers) else 1


def _ticket_priority(ticket_id: str) -> str:
    """The ticket's own priority, as the helpdesk has it (`normal`, said so, if it cannot)."""
    from shared.errors import PermanentError, TransientError
    from shared.helpdesk.configured import open_configured
    from shared.settings import HelpdeskSettings

    settings = HelpdeskSettings()
    if settings.helpdesk_kind == "sql" and not settings.helpdesk_url:
        if not (settings.var_dir / "helpdesk.sqlite").exists():  # no demo helpdesk here
            return "normal"

    async def read() -> str:
        source = open_configured(settings)
        try:
            return (await source.get_ticket(ticket_id)).priority
        finally:
            await source.close()

    try:
        return asyncio.run(read())
    except (PermanentError, TransientError, ConfigError) as exc:
        print(f"desk send-webhook: {exc}; sending priority normal", file=sys.stderr)
        return "normal"
