"""The `desk` console script.

desk up                      the whole system on this machine (embedded NATS, six services)
desk status [--json]         the running stack: URLs, pids, health
desk provision               create or update streams and buckets (idempotent)
desk <service>               run one service: ingress, router, drafter, inbox_api, sender,
                             reconciler (what each Kubernetes Deployment runs)
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import sys

from shared.settings import SERVICE_SETTINGS, DeskSettings, StackSettings

ALIASES = {name.replace("_", "-"): name for name in SERVICE_SETTINGS}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="desk", description="Ambient Desk")
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")
    sub.add_parser("up", help="run the whole system on this machine")
    status = sub.add_parser("status", help="show the running stack")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    sub.add_parser("provision", help="create or update streams and buckets")
    for name in SERVICE_SETTINGS:
        sub.add_parser(name, aliases=[name.replace("_", "-")], help=f"run the {name} service")
    return parser


def _run_service(name: str) -> int:
    settings = SERVICE_SETTINGS[name]()
    module = importlib.import_module(f"services.{name}.main")
    asyncio.run(module.run(settings))
    return 0


def _status(as_json: bool) -> int:
    from .status import NoStack, collect, render

    try:
        status = asyncio.run(collect(DeskSettings().var_dir))
    except NoStack as exc:
        print(f"desk status: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(status, indent=2) if as_json else render(status))
    return 0 if all(s["healthy"] for s in status["services"].values()) else 2


def _provision() -> int:
    from shared.bus import Bus
    from shared.errors import TransientError
    from shared.streams import Topology, provision

    settings = DeskSettings()

    async def go() -> dict[str, str]:
        bus = await Bus.connect(settings.nats_url, service="provision", reconnect=False)
        try:
            return dict(
                await provision(
                    bus.js, Topology(settings.stream_replicas, settings.duplicate_window)
                )
            )
        finally:
            await bus.close()

    try:
        changes = asyncio.run(go())
    except TransientError as exc:
        print(f"desk provision: {exc} ({settings.nats_url})", file=sys.stderr)
        return 1
    for name, change in changes.items():
        print(f"{name:<16} {change}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    command = ALIASES.get(args.command, args.command)
    if command == "up":
        from .stack import run

        return run(StackSettings())
    if command == "status":
        return _status(args.json)
    if command == "provision":
        return _provision()
    return _run_service(command)
