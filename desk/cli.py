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
from typing import Any

from pydantic import ValidationError
from pydantic_settings import SettingsError

from shared import catalog
from shared import logging as desk_logging
from shared.bus import NatsAuth
from shared.catalog import SERVICE_SETTINGS
from shared.settings import (
    ConfigError,
    DeskSettings,
    StackSettings,
    setting_error,
)

from . import (
    dbroles,
    demo,
    dlq,
    evaluation,
    inbox,
    provisioning,
    reconcile,
    results,
    samples,
    shadow,
    tickets,
    trace,
)

ALIASES = {name.replace("_", "-"): name for name in SERVICE_SETTINGS}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="desk", description="Ambient Desk")
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")
    sub.add_parser("up", help="run the whole system on this machine")
    status = sub.add_parser("status", help="show the running stack")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    provisioning.add_arguments(sub)
    samples.add_arguments(sub)
    dlq.add_arguments(sub)
    trace.add_arguments(sub)
    dbroles.add_arguments(sub)
    inbox.add_arguments(sub)
    results.add_arguments(sub)
    reconcile.add_arguments(sub)
    demo.add_arguments(sub)
    evaluation.add_arguments(sub)
    shadow.add_arguments(sub)
    tickets.add_arguments(sub)
    for name in SERVICE_SETTINGS:
        service = sub.add_parser(
            name, aliases=[name.replace("_", "-")], help=f"run the {name} service"
        )
        parts = catalog.PARTS.get(name, {})
        if parts:
            service.add_argument(
                "part", nargs="?", choices=sorted(parts), help="run only this part of it"
            )
    return parser


def _run_service(name: str, part: str | None = None) -> int:
    spec = catalog.PARTS[name][part] if part else catalog.spec(name)
    assert spec.settings is not None  # a service or a part of one: it has settings
    settings: DeskSettings = spec.settings()
    if "nats_url" not in settings.model_fields_set:  # never a broker the operator did not name
        print(
            f"desk {name}: DESK_NATS_URL is not set: start the whole system with `desk up`, "
            "or set DESK_NATS_URL to the broker this service is to use",
            file=sys.stderr,
        )
        return 2
    from shared.service import Stopped

    module = importlib.import_module(spec.module)
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


def _status(as_json: bool) -> int:
    from .status import NoStack, collect, render

    try:
        status = asyncio.run(collect(DeskSettings().var_dir))
    except NoStack as exc:
        print(f"desk status: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(status, indent=2) if as_json else render(status))
    return 0 if all(s["healthy"] for s in status["services"].values()) else 2


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
        return _with_broker("provision", provisioning.provision)
    if command == "nats-config":
        return provisioning.nats_config(args.passwords)
    if command == "send-webhook":
        return samples.main(args)
    if command == "helpdesk":
        return tickets.main(args)
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
