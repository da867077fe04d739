"""The `desk` console script.

desk up                          the whole system on this machine (embedded NATS, services)
desk status [--json]             the running stack: URLs, pids, health
desk provision                   create or update streams and buckets (idempotent)
desk nats-config --passwords F   a nats-server authorization block, one user per service
                                 (bcrypt hashes; the passwords stay in F)
desk send-webhook [...]          sign and send a sample event to ingress
desk helpdesk create [...]       add a ticket to the demo helpdesk (no webhook)
desk helpdesk message [...]      add a message to a demo ticket, send ticket.message.created
desk helpdesk close --ticket T   close a demo ticket, send ticket.closed
desk inbox list|show|accept|...  work the review inbox from the terminal
desk dlq list|show|replay        inspect and replay dead letters
desk trace ID                    one event's path (event id, item id, ticket or trace id)
desk results tail [--all]        print result events (CloudEvents) as they arrive
desk reconcile [--stale]         backfill events the system never got (and remind stale ones)
desk report                      print and publish the daily report
desk demo                        the demo scenario on a fresh stack, step by step
desk eval [--model M] [--prompt F] measure the drafts on the eval set (or --from-review-log)
desk shadow --since 24h [...]    replay real events through a candidate; sends nothing
desk <service>                   run one service: ingress, router, drafter, inbox_api,
                                 sender, reconciler (what each Kubernetes Deployment runs)
desk ingress imap                poll a mailbox into email.received events
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_settings import SettingsError

from shared import logging as desk_logging
from shared.bus import NatsAuth
from shared.catalog import SERVICE_SETTINGS
from shared.settings import (
    ConfigError,
    DeskSettings,
    ImapSettings,
    StackSettings,
    setting_error,
)

from . import dbroles, demo, dlq, evaluation, inbox, reconcile, results, shadow, trace

ALIASES = {name.replace("_", "-"): name for name in SERVICE_SETTINGS}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="desk", description="Ambient Desk")
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")
    sub.add_parser("up", help="run the whole system on this machine")
    status = sub.add_parser("status", help="show the running stack")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    sub.add_parser("provision", help="create or update streams and buckets")
    nats_config = sub.add_parser(
        "nats-config",
        help="print a nats-server authorization block, one user per service (bcrypt hashes)",
    )
    nats_config.add_argument(
        "--passwords",
        type=Path,
        required=True,
        help="JSON file {user: password}; created with random passwords (mode 0600) if missing",
    )
    send = sub.add_parser("send-webhook", help="sign and send a sample event to ingress")
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
    dlq.add_arguments(sub)
    trace.add_arguments(sub)
    dbroles.add_arguments(sub)
    inbox.add_arguments(sub)
    results.add_arguments(sub)
    reconcile.add_arguments(sub)
    demo.add_arguments(sub)
    evaluation.add_arguments(sub)
    shadow.add_arguments(sub)
    helpdesk = sub.add_parser("helpdesk", help="the demo helpdesk (source system)")
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
    for name in SERVICE_SETTINGS:
        service = sub.add_parser(
            name, aliases=[name.replace("_", "-")], help=f"run the {name} service"
        )
        if name == "ingress":
            service.add_argument("part", nargs="?", choices=["imap"], help="the IMAP poller")
    return parser


def _run_service(name: str, part: str | None = None) -> int:
    settings: DeskSettings = ImapSettings() if part == "imap" else SERVICE_SETTINGS[name]()
    if "nats_url" not in settings.model_fields_set:  # never a broker the operator did not name
        print(
            f"desk {name}: DESK_NATS_URL is not set: start the whole system with `desk up`, "
            "or set DESK_NATS_URL to the broker this service is to use",
            file=sys.stderr,
        )
        return 2
    from shared.service import Stopped

    module = importlib.import_module(
        "services.ingress.imap" if part == "imap" else f"services.{name}.main"
    )
    _loaded()
    try:
        asyncio.run(module.run(settings))
    except ConfigError as exc:
        print(f"desk {name}: {exc}", file=sys.stderr)
        return 2
    except Stopped:  # asked to stop before NATS ever answered: nothing was started
        pass
    return 0


def _stack_broker() -> tuple[str, NatsAuth] | None:
    """DESK_NATS_URL with the operator's NATS credentials if set, else the running stack's
    broker (its admin URL carries them); None: neither (never a broker the operator did not
    name)."""
    settings = DeskSettings()
    if "nats_url" in settings.model_fields_set:
        return settings.nats_url, settings.nats_auth()
    try:
        state = json.loads((settings.var_dir / "stack.json").read_text())
        return str(state.get("nats_admin_url") or state["nats_url"]), NatsAuth()
    except (OSError, ValueError, KeyError):
        return None


def _with_broker(command: str, run: Any) -> int:
    broker = _stack_broker()
    if broker is None:
        print(
            f"desk {command}: no running stack found in {DeskSettings().var_dir} "
            "(start `desk up`), or set DESK_NATS_URL",
            file=sys.stderr,
        )
        return 2
    result: int = run(*broker)
    return result


def _helpdesk(args: argparse.Namespace) -> int:
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
            return _helpdesk_create(args, url)
        if args.helpdesk_command == "message":
            return _helpdesk_message(args, url, stack)
        return _helpdesk_close(args, url, stack)
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


def _helpdesk_create(args: argparse.Namespace, url: str) -> int:
    from .helpdesk import create

    ticket = create(url, args.customer, args.subject, args.body, args.priority)
    print(f"{ticket.id} created for {ticket.customer.name} (no webhook sent)")
    return 0


def _helpdesk_message(args: argparse.Namespace, url: str, stack: tuple[str, str] | None) -> int:
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


def _helpdesk_close(args: argparse.Namespace, url: str, stack: tuple[str, str] | None) -> int:
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


def _send_webhook(args: argparse.Namespace) -> int:
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


def _status(as_json: bool) -> int:
    from .status import NoStack, collect, render

    try:
        status = asyncio.run(collect(DeskSettings().var_dir))
    except NoStack as exc:
        print(f"desk status: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(status, indent=2) if as_json else render(status))
    return 0 if all(s["healthy"] for s in status["services"].values()) else 2


def _nats_config(path: Path) -> int:
    """Print the authorization block with bcrypt hashes: the Secret it goes into (desk-nats-auth)
    then holds no password anyone could log in with; the passwords stay in `path` and in each
    service's own Secret."""
    from shared.passwords import nats_hashed
    from shared.permissions import authorization_block

    from .credentials import nats_passwords

    if path.exists():
        try:
            passwords = json.loads(path.read_text())
        except ValueError:
            print(f"desk nats-config: {path} is not JSON", file=sys.stderr)
            return 2
        if not isinstance(passwords, dict) or not all(
            isinstance(p, str) and p for p in passwords.values()
        ):
            print(f"desk nats-config: {path} must map each user to a password", file=sys.stderr)
            return 2
        added = {u: p for u, p in nats_passwords().items() if u not in passwords}
        if added:  # a service or role declared since the file was written
            passwords.update(added)
            path.write_text(json.dumps(passwords, indent=2) + "\n")
            print(f"desk nats-config: added users {', '.join(added)} to {path}", file=sys.stderr)
    else:
        passwords = nats_passwords()
        path.touch(mode=0o600)
        path.write_text(json.dumps(passwords, indent=2) + "\n")
    try:
        hashed = nats_hashed(passwords)
    except ValueError as exc:  # names the user, never the password
        print(f"desk nats-config: {path}: {exc}", file=sys.stderr)
        return 2
    print(authorization_block(hashed), end="")
    return 0


def _provision(nats_url: str, auth: NatsAuth) -> int:
    from shared.bus import Bus, without_credentials
    from shared.consumer import declared_consumers
    from shared.errors import TransientError
    from shared.streams import Topology, provision

    settings = DeskSettings()

    async def go() -> dict[str, str]:
        bus = await Bus.connect(nats_url, service="provision", auth=auth, reconnect=False)
        try:
            return dict(
                await provision(
                    bus.js,
                    Topology(settings.stream_replicas, settings.duplicate_window),
                    consumers=declared_consumers(settings.consumer_options()),
                    adopt_shared_ledger=True,
                )
            )
        finally:
            await bus.close()

    try:
        changes = asyncio.run(go())
    except TransientError as exc:
        print(f"desk provision: {exc} ({without_credentials(nats_url)})", file=sys.stderr)
        return 1
    for name, change in changes.items():
        print(f"{name:<16} {change}")
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except (ValidationError, SettingsError) as exc:
        if isinstance(exc, ValidationError) and not exc.title.endswith("Settings"):
            raise  # not the settings: a fault of ours
        command = next(iter(sys.argv[1:] if argv is None else argv), "")
        print(f"desk {command}: {setting_error(exc)}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `desk inbox list | head`: the reader has gone, nothing to say
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush is quiet too
        return 1


def _loaded() -> None:
    """What is imported by now lives as long as the process: out of every later collection.
    The collector goes back on (`python -m desk` starts with it off, see desk/__main__.py)."""
    gc.freeze()
    gc.enable()


def _main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    command = ALIASES.get(args.command, args.command)
    if command not in SERVICE_SETTINGS:
        _loaded()  # a service loads its own modules first (_run_service)
    if command not in SERVICE_SETTINGS and command != "up":
        # one-shot commands: their own messages only, not the bus's reconnect chatter
        desk_logging.configure("desk", "ERROR", "text")
    if command == "up":
        from .stack import run

        try:
            return run(StackSettings())
        except ConfigError as exc:
            print(f"desk up: {exc}", file=sys.stderr)
            return 2
    if command == "status":
        return _status(args.json)
    if command == "provision":
        return _with_broker("provision", _provision)
    if command == "nats-config":
        return _nats_config(args.passwords)
    if command == "send-webhook":
        return _send_webhook(args)
    if command == "helpdesk":
        return _helpdesk(args)
    if command == "inbox":
        return inbox.main(args, DeskSettings().var_dir.resolve())
    if command == "demo":
        return demo.main(args)
    if command == "eval":
        return evaluation.main(args)
    if command == "shadow":
        return shadow.main(args)
    if command in ("reconcile", "report"):
        return reconcile.main(args)
    if command == "results":
        return _with_broker("results", lambda url, auth: results.main(args, url, auth))
    if command == "db-roles":
        return dbroles.main(args)
    if command == "dlq":
        return _with_broker("dlq", lambda url, auth: dlq.main(args, url, auth))
    if command == "trace":
        return _with_broker("trace", lambda url, auth: trace.main(args, url, auth))
    return _run_service(command, getattr(args, "part", None))
