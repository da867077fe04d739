"""`desk helpdesk create|message|close`: change the demo helpdesk, and tell the running stack
as the helpdesk would (a signed webhook to ingress), unless `--no-webhook`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from shared.settings import setting_error


def add_arguments(subparsers: Any) -> None:
    """Register `helpdesk` and its sub-commands on the `desk` parser's sub-parsers."""
    helpdesk = subparsers.add_parser("helpdesk", help="the demo helpdesk (source system)")
    helpdesk_sub = helpdesk.add_subparsers(dest="helpdesk_command", required=True)
    create = helpdesk_sub.add_parser("create", help="add a ticket without sending a webhook")
    create.add_argument("--customer", required=True, help="customer id (C007) or e-mail")
    create.add_argument("--subject", required=True)
    create.add_argument("--body", required=True)
    create.add_argument("--priority", default="normal", choices=["low", "normal", "high", "urgent"])
    message = helpdesk_sub.add_parser(
        "message", help="add a message to a ticket and send the ticket.message.created webhook"
    )
    message.add_argument("--ticket", required=True)
    message.add_argument("--body", required=True)
    message.add_argument("--author", default="customer", choices=["customer", "agent", "note"])
    message.add_argument("--name", help="author name (default: the customer's, or the team's)")
    message.add_argument("--no-webhook", action="store_true", help="only change the helpdesk")
    close = helpdesk_sub.add_parser(
        "close", help="close a ticket and send the ticket.closed webhook"
    )
    close.add_argument("--ticket", required=True)
    close.add_argument("--no-webhook", action="store_true", help="only change the helpdesk")


def main(args: argparse.Namespace) -> int:
    """`desk helpdesk create|message|close` on the demo (sql) helpdesk."""
    from shared.errors import PermanentError, TransientError
    from shared.settings import HelpdeskSettings

    from .helpdesk import ensure_demo

    command = f"desk helpdesk {args.helpdesk_command}"
    try:
        settings = HelpdeskSettings()
    except ValidationError as exc:
        print(f"{command}: {setting_error(exc)}", file=sys.stderr)
        return 2
    if settings.helpdesk_kind != "sql":
        print(f"{command}: only the demo (sql) helpdesk can be written to", file=sys.stderr)
        return 2
    stack: tuple[str, str] | None = None
    if args.helpdesk_command != "create" and not args.no_webhook:
        stack = _stack_webhook(settings.var_dir.resolve())
        if stack is None:  # before changing anything: the helpdesk and the stack stay in step
            print(
                f"{command}: no running stack found (start `desk up`), or pass --no-webhook",
                file=sys.stderr,
            )
            return 2
    url = settings.helpdesk_location()
    try:
        ensure_demo(url)  # the demo helpdesk always has its tickets
        if args.helpdesk_command == "create":
            return _create(args, url)
        if args.helpdesk_command == "message":
            return _message(args, url, stack)
        return _close(args, url, stack)
    except PermanentError as exc:  # an unknown ticket
        print(f"{command}: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return 2 if args.helpdesk_command != "create" else 1
    except TransientError as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return 1


def _stack_webhook(var_dir: Path) -> tuple[str, str] | None:
    """(ingress URL, the helpdesk source's dev secret) of the running stack, if there is one."""
    from .webhook import defaults

    url, secret, _ = defaults(var_dir, "helpdesk")
    return (url, secret) if url and secret else None


def _create(args: argparse.Namespace, url: str) -> int:
    from .helpdesk import create

    ticket = create(url, args.customer, args.subject, args.body, args.priority)
    print(f"{ticket.id} created for {ticket.customer.name} (no webhook sent)")
    return 0


def _message(args: argparse.Namespace, url: str, stack: tuple[str, str] | None) -> int:
    from shared.helpdesk.events import message_event

    from .helpdesk import add_message

    ticket, message = add_message(url, args.ticket, args.body, args.author, args.name)
    print(
        f"{message.id} added to {ticket.id} by {message.author} {message.author_name!r}; "
        f"the ticket is {ticket.status}" + (" (no webhook sent)" if stack is None else "")
    )
    if stack is None:
        return 0
    return _notify_stack(
        "desk helpdesk message", stack, message_event(ticket, message, event_id=_event_id())
    )


def _close(args: argparse.Namespace, url: str, stack: tuple[str, str] | None) -> int:
    from shared.helpdesk.events import closed_event

    from .helpdesk import close

    ticket = close(url, args.ticket)
    print(f"{ticket.id} closed" + (" (no webhook sent)" if stack is None else ""))
    if stack is None:
        return 0
    return _notify_stack("desk helpdesk close", stack, closed_event(ticket, event_id=_event_id()))


def _event_id() -> str:
    import uuid

    return f"evt_{uuid.uuid4().hex[:16]}"


def _notify_stack(command: str, stack: tuple[str, str], event: dict[str, Any]) -> int:
    """Send `event` to the stack's ingress as the helpdesk source, signed; print the answer."""
    from .webhook import SendError, send

    url, secret = stack
    try:
        [(status, body)] = send(
            url=url, source="helpdesk", secret=secret, scheme="standard", event=event, repeat=1
        )
    except SendError as exc:
        print(
            f"{command}: the helpdesk changed, but the webhook was not sent: {exc}", file=sys.stderr
        )
        return 1
    line = f"{event['type']} webhook {event['id']} to {url}: {status} {body.strip()}"
    if status != 202:
        print(
            f"{command}: the helpdesk changed, but ingress refused the webhook: {line}",
            file=sys.stderr,
        )
        return 1
    print(line)
    return 0
