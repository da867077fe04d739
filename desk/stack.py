"""`desk up`: the whole system on one machine.

Starts the embedded nats-server (unless `DESK_NATS_URL` names a broker), provisions the streams,
runs the six services as separate processes, restarts one that dies (with back-off), writes
`var/stack.json` for `desk status`, and on Ctrl-C or SIGTERM stops every child it started.

`Stack` runs the parts in that order, each in a module of its own: `broker` (start, provision,
restart a node), `supervisor` (the children: ports, environment, restarts, stopping),
`statefile` (`var/stack.json`) and `banner` (waiting for readiness, then saying where
everything is).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys

from shared import logging as desk_logging
from shared.catalog import SERVICE_SETTINGS
from shared.db import private_dir
from shared.errors import TransientError
from shared.settings import DeskSettings, StackSettings

from . import credentials
from .banner import READY_WITHIN, banner, until_ready
from .broker import Broker
from .errors import StackError
from .helpdesk import ensure_demo
from .natsserver import NatsServerError
from .preflight import check_settings, unknown_variables
from .statefile import StateFile
from .supervisor import SERVICES, Supervisor, public_port

__all__ = ["SERVICES", "Stack", "StackError", "run"]


class Stack:
    def __init__(self, settings: StackSettings) -> None:
        self.settings = settings
        self.var_dir = settings.var_dir.resolve()
        self.state_file = StateFile(self.var_dir)
        self.broker = Broker(settings, self.var_dir)
        self._stop = asyncio.Event()
        self.supervisor = Supervisor(
            settings, self.var_dir, self.broker, self._stop, self._write_state
        )
        self._creds_path = self.var_dir / credentials.FILENAME
        self.service_settings: dict[str, DeskSettings] = {}  # each service's, as it loads them

    def load_credentials(self) -> None:
        """The development credentials (made on the first run, completed on a later one): what
        the children are handed (the report token, the inbox's audit key) and the broker's
        passwords."""
        self._creds_path = credentials.load_or_create(self.var_dir)
        creds = json.loads(self._creds_path.read_text())
        self.supervisor.report_token = str(creds.get("report_token") or "")
        self.supervisor.audit_key = str(creds.get("audit_key") or "")
        self.broker.passwords = dict(creds.get("nats_passwords") or {})

    async def run(self) -> int:
        self.state_file.refuse_second_stack()
        private_dir(self.var_dir)  # 0700: credentials, databases, logs, the store
        (self.var_dir / "log").mkdir(exist_ok=True)
        self.load_credentials()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._stop.set)
        # every service's place and settings, before anything starts
        self.supervisor.plan({name: public_port(self.settings, name) for name in SERVICES})
        self.service_settings = check_settings(self.supervisor)
        for line in unknown_variables(os.environ):
            print(f"desk up: {line}", file=sys.stderr)
        if self.settings.helpdesk_kind == "sql" and ensure_demo(self.settings.helpdesk_location()):
            print("demo helpdesk created with 41 tickets", file=sys.stderr)
        try:
            self.broker.start()
            await self.broker.provision()
            await self.supervisor.start()
            self._write_state()
            print("starting the services…", file=sys.stderr, flush=True)
            children = self.supervisor.children
            waiting = await until_ready(children, READY_WITHIN, self._stop)
            if self._stop.is_set():
                return 0
            log_dir = self.var_dir / "log"
            shown = banner(
                self.broker, children, self._creds_path, log_dir, waiting, self.service_settings
            )
            print(shown, flush=True)
            nats_watch = asyncio.create_task(
                self.broker.watch(lambda: self.supervisor.stopping, self._write_state)
            )
            await self._stop.wait()
            nats_watch.cancel()
        finally:
            await self._shutdown()
        return 0

    def _write_state(self) -> None:
        self.state_file.write(self.broker, self.supervisor.children, self._creds_path)

    async def _shutdown(self) -> None:
        await self.supervisor.stop()
        self.broker.stop()
        self.state_file.remove()
        print("stopped", file=sys.stderr)


def run(settings: StackSettings) -> int:
    assert set(SERVICES) == set(SERVICE_SETTINGS)
    desk_logging.configure("stack", settings.log_level, "text")
    try:
        return asyncio.run(Stack(settings).run())
    except (StackError, NatsServerError, TransientError) as exc:
        print(f"desk up: {exc}", file=sys.stderr)
        return 1
