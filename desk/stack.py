"""`desk up`: the whole system on one machine.

Starts the embedded nats-server (unless `DESK_NATS_URL` names a broker), provisions the streams,
runs the six services as separate processes, restarts one that dies (with back-off), writes
`var/stack.json` for `desk status`, and on Ctrl-C or SIGTERM stops every child it started.

Each child gets an ops port (health and metrics) and, if it has public routes (the catalog's
`public_port`: ingress, inbox_api), a public port; both are picked here so that they are known.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from shared import catalog
from shared import logging as desk_logging
from shared.bus import Bus, NatsAuth
from shared.catalog import SERVICE_SETTINGS
from shared.consumer import declared_consumers
from shared.db import private_dir
from shared.errors import TransientError
from shared.permissions import ADMIN, authorization_block
from shared.settings import StackSettings
from shared.streams import NOT_READY, Topology, provision

from . import credentials
from .helpdesk import ensure_demo
from .natsserver import NatsCluster, NatsServer, NatsServerError
from .process import alive, die_with_parent, free_port, port_free

log = logging.getLogger("desk.stack")

SERVICES = tuple(s.name for s in catalog.SERVICES if s.supervised)
STATE_FILE = "stack.json"
STABLE_AFTER = 30.0  # a child that ran this long gets its back-off reset
READY_WITHIN = 60.0  # seconds the banner waits for every service's /readyz


class StackError(RuntimeError):
    pass


@dataclass
class Child:
    name: str
    port: int | None  # its public routes' (None: it has none)
    ops_port: int  # /healthz, /readyz, /metrics
    log_path: Path
    proc: asyncio.subprocess.Process | None = None
    started_at: float = 0.0
    restarts: int = 0
    backoff: float = 0.5
    fixed: bool = False  # the public port is the one the operator asked for: never moved
    watcher: asyncio.Task[None] | None = field(default=None, repr=False)

    @property
    def url(self) -> str | None:
        return None if self.port is None else f"http://127.0.0.1:{self.port}"

    @property
    def ops_url(self) -> str:
        return f"http://127.0.0.1:{self.ops_port}"


class Stack:
    def __init__(self, settings: StackSettings) -> None:
        self.settings = settings
        self.var_dir = settings.var_dir.resolve()
        self.state_path = self.var_dir / STATE_FILE
        self.nats: NatsServer | NatsCluster | None = None
        self.nats_url = ""
        self.children: dict[str, Child] = {}
        self._stop = asyncio.Event()
        self._stopping = False
        self._viewer_token = ""
        self._nats_passwords: dict[str, str] = {}

    # -- life cycle ---------------------------------------------------------------------------

    async def run(self) -> int:
        self._refuse_second_stack()
        private_dir(self.var_dir)  # 0700: credentials, databases, logs, the store
        (self.var_dir / "log").mkdir(exist_ok=True)
        creds_path = credentials.load_or_create(self.var_dir)
        creds = json.loads(creds_path.read_text())
        self._viewer_token = str(creds.get("viewer_token") or "")
        self._nats_passwords = dict(creds.get("nats_passwords") or {})
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._stop.set)
        if self.settings.helpdesk_kind == "sql" and ensure_demo(self.settings.helpdesk_location()):
            print("demo helpdesk created with 41 tickets", file=sys.stderr)
        ports = {name: self._port_for(name) for name in SERVICES}  # before anything starts
        try:
            self._start_nats()
            await self._provision()
            for name in SERVICES:
                port, fixed = ports[name]
                self.children[name] = Child(
                    name, port, free_port(), self.var_dir / "log" / f"{name}.log", fixed=fixed
                )
            for child in self.children.values():
                await self._spawn(child)
                child.watcher = asyncio.create_task(self._watch(child))
            self._write_state(creds_path)
            print("starting the services…", file=sys.stderr, flush=True)
            waiting = await self._until_ready(READY_WITHIN)
            if self._stop.is_set():
                return 0
            self._print_banner(creds_path, waiting)
            nats_watch = asyncio.create_task(self._watch_nats())
            await self._stop.wait()
            nats_watch.cancel()
        finally:
            await self._shutdown()
        return 0

    def _refuse_second_stack(self) -> None:
        if not self.state_path.exists():
            return
        try:
            pid = int(json.loads(self.state_path.read_text()).get("pid", 0))
        except (ValueError, OSError):
            pid = 0
        if pid and pid != os.getpid() and alive(pid):
            raise StackError(
                f"a stack is already running from {self.var_dir} (pid {pid}); "
                "stop it first or set DESK_VAR_DIR"
            )

    def _start_nats(self) -> None:
        if self.settings.nats_url:
            self.nats_url = self.settings.nats_url
            return
        s = self.settings
        if s.stream_replicas > s.nats_nodes:
            raise StackError(
                f"DESK_STREAM_REPLICAS={s.stream_replicas} needs at least that many broker nodes; "
                f"set DESK_NATS_NODES={s.stream_replicas} (or lower the replicas)"
            )
        # one user per service, each confined to its own subjects
        authorization = authorization_block(self._nats_passwords)
        sync_always = s.nats_sync == "always"
        if s.nats_nodes == 1:
            self.nats = NatsServer(
                self.var_dir / "nats",
                sync_always=sync_always,
                log_file=self.var_dir / "log" / "nats-server.log",
                authorization=authorization,
            )
        else:
            self.nats = NatsCluster(
                self.var_dir / "nats",
                nodes=s.nats_nodes,
                sync_always=sync_always,
                log_dir=self.var_dir / "log",
                authorization=authorization,
                route_auth=credentials.route_auth(self.var_dir),  # routes need a password
            )
        self.nats.start()
        self.nats_url = self.nats.url

    async def _provision(self) -> None:
        s = self.settings
        bus = await Bus.connect(
            self.nats_url, service="stack", auth=self._auth(ADMIN), reconnect=False
        )
        try:
            await provision(
                bus.js,
                Topology(s.stream_replicas, s.duplicate_window),
                consumers=declared_consumers(s.consumer_options()),
                adopt_shared_ledger=True,
            )
        except NOT_READY as exc:
            raise StackError(
                f"JetStream did not become ready to create the streams ({exc.__class__.__name__})"
            ) from exc
        finally:
            await bus.close()

    def _auth(self, user: str) -> NatsAuth:
        if self.nats is None:  # an external broker: the operator's settings apply
            return self.settings.nats_auth()
        return NatsAuth(user=user, password=self._nats_passwords[user])

    @property
    def admin_url(self) -> str:
        """The broker URL with the admin user, for operator commands (kept out of status)."""
        if self.nats is None:
            return self.nats_url
        password = self._nats_passwords[ADMIN]
        return ",".join(f"nats://{ADMIN}:{password}@{n.host}:{n.port}" for n in self._nodes())

    def _nodes(self) -> list[NatsServer]:
        if self.nats is None:
            return []
        return self.nats.nodes if isinstance(self.nats, NatsCluster) else [self.nats]

    def _port_for(self, name: str) -> tuple[int | None, bool]:
        """(public port, whether it is the operator's choice); None for a service without
        public routes."""
        if catalog.spec(name).public_port is None:
            return None, False
        field = {"ingress": "ingress_port", "inbox_api": "inbox_api_port"}.get(name)
        port = int(getattr(self.settings, field)) if field else 0
        if port and port_free(port):
            return port, True
        if port and field in self.settings.model_fields_set:
            # a helpdesk or a reviewer pointed at this port would reach whatever holds it
            raise StackError(
                f"port {port} (DESK_{field.upper()}) is busy: stop what holds it, or choose "
                "another port (0 for any free one)"
            )
        if port:
            print(f"port {port} is busy; {name} takes a free port instead", file=sys.stderr)
        return free_port(), False

    def child_env(self, child: Child) -> dict[str, str]:
        """The environment `child` runs with: this process's, plus what the stack decides."""
        env = dict(os.environ)
        env.pop("DESK_HTTP_PORT", None)  # only the children with public routes get one
        inbox_url = self.children["inbox_api"].url
        assert inbox_url is not None  # the inbox has public routes
        env.update(
            {
                "DESK_NATS_URL": self.nats_url,
                "DESK_HTTP_HOST": "127.0.0.1",
                **({"DESK_HTTP_PORT": str(child.port)} if child.port is not None else {}),
                "DESK_OPS_PORT": str(child.ops_port),
                "DESK_VAR_DIR": str(self.var_dir),
                "DESK_PROVISION": "false",  # done once above
                "DESK_INBOX_URL": inbox_url,
                **(
                    {
                        "DESK_NATS_USER": child.name,
                        "DESK_NATS_PASSWORD": self._nats_passwords[child.name],
                    }
                    if self.nats is not None
                    else {}
                ),
                "PYTHONUNBUFFERED": "1",
            }
        )
        if (
            child.name == "reconciler"
            and self._viewer_token
            and not {
                "DESK_REPORT_TOKEN",
                "DESK_REVIEWERS",
            }
            & set(env)
        ):  # the dev viewer token, while the dev tokens are the inbox's
            env["DESK_REPORT_TOKEN"] = self._viewer_token  # the report reads the inbox API
        return env

    async def _spawn(self, child: Child) -> None:
        env = self.child_env(child)
        with open(child.log_path, "ab") as out:
            child.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "desk",
                child.name,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
                env=env,
                # Ctrl-C reaches only the supervisor, which stops the children in order.
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        child.started_at = time.monotonic()

    async def _watch(self, child: Child) -> None:
        """Restart the child whenever it exits, until the stack stops."""
        while True:
            assert child.proc is not None
            code = await child.proc.wait()
            if self._stopping:
                return
            ran = time.monotonic() - child.started_at
            if ran >= STABLE_AFTER:
                child.backoff = 0.5
            print(
                f"{child.name} exited with {code}; restarting in {child.backoff:.1f}s "
                f"(log: {child.log_path})",
                file=sys.stderr,
            )
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stop.wait(), child.backoff)
            if self._stopping or self._stop.is_set():
                return
            child.backoff = min(child.backoff * 2, self.settings.restart_backoff_max)
            child.restarts += 1
            # A port picked for us can be taken meanwhile (any outgoing connection may get it
            # as its local port): restarting on it would fail forever. Move.
            if (
                child.port is not None
                and not child.fixed
                and not port_free(child.port, as_services_bind=True)
            ):
                old, child.port = child.port, free_port()
                print(f"{child.name}: port {old} is taken; now {child.url}", file=sys.stderr)
            if not port_free(child.ops_port, as_services_bind=True):
                old, child.ops_port = child.ops_port, free_port()
                print(
                    f"{child.name}: ops port {old} is taken; now {child.ops_url}", file=sys.stderr
                )
            await self._spawn(child)
            self._update_state()

    async def _watch_nats(self) -> None:
        """Start a broker node again (same ports, same store) whenever it exits."""
        while True:
            await asyncio.sleep(1.0)
            for node in self._nodes():
                if node.running or self._stopping:
                    continue
                print(
                    f"nats-server {node.name} exited; restarting it on the same store",
                    file=sys.stderr,
                )
                try:
                    await asyncio.to_thread(node.start, 30.0)
                except RuntimeError as exc:
                    print(f"nats-server restart failed: {exc}", file=sys.stderr)
                self._update_state()

    async def _shutdown(self) -> None:
        self._stopping = True
        procs = [c.proc for c in self.children.values() if c.proc and c.proc.returncode is None]
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        grace = self.settings.drain_timeout + 5
        if procs:
            await asyncio.wait([asyncio.create_task(p.wait()) for p in procs], timeout=grace)
            for proc in procs:
                if proc.returncode is None:
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
                    await proc.wait()
        for child in self.children.values():
            if child.watcher:
                child.watcher.cancel()
        if self.nats is not None:
            self.nats.stop()
        with contextlib.suppress(FileNotFoundError):
            self.state_path.unlink()
        print("stopped", file=sys.stderr)

    # -- state for `desk status` ---------------------------------------------------------------

    def _state(self, creds_path: Path) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "nats_url": self.nats_url,
            "nats_admin_url": self.admin_url,
            "embedded_nats": self.nats is not None,
            "nats_nodes": [
                {"name": n.name, "url": n.url, "pid": n.proc.pid if n.proc else None}
                for n in self._nodes()
            ],
            "credentials": str(creds_path),
            "services": {
                name: {"url": c.url, "ops_url": c.ops_url, "pid": c.proc.pid if c.proc else None}
                for name, c in self.children.items()
            },
        }

    def _write_state(self, creds_path: Path) -> None:
        self._creds_path = creds_path
        tmp = self.state_path.with_suffix(".tmp")
        tmp.touch(mode=0o600)  # it holds the admin URL
        tmp.write_text(json.dumps(self._state(creds_path), indent=2))
        tmp.replace(self.state_path)

    def _update_state(self) -> None:
        self._write_state(self._creds_path)

    async def _until_ready(self, within: float) -> list[str]:
        """Wait until every service answers /readyz (or Ctrl-C); the ones still not ready."""
        deadline = time.monotonic() + within
        pending = list(self.children)
        async with httpx.AsyncClient(timeout=2) as client:
            while pending and time.monotonic() < deadline and not self._stop.is_set():
                for name in list(pending):
                    try:
                        answer = await client.get(f"{self.children[name].ops_url}/readyz")
                    except httpx.HTTPError:
                        continue
                    if answer.status_code == 200:
                        pending.remove(name)
                if pending:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stop.wait(), 0.2)
        return pending

    def _print_banner(self, creds_path: Path, waiting: list[str]) -> None:
        nodes = f"{self.settings.nats_nodes}-node cluster, " if self.settings.nats_nodes > 1 else ""
        nats_note = (
            f"embedded, {nodes}store {self.nats.store_dir}, sync {self.settings.nats_sync}"
            if self.nats
            else "external"
        )
        lines = [
            "Ambient Desk is up."
            if not waiting
            else f"Ambient Desk is up, but not ready yet: {', '.join(waiting)} (see the logs).",
            f"  {'nats':<12} {self.nats_url}  ({nats_note})",
        ]
        hint = {"ingress": "  POST /webhooks/{source}", "inbox_api": "  review inbox"}
        for name, c in self.children.items():
            if c.url is not None:
                lines.append(f"  {name:<12} {c.url}{hint.get(name, '')}")
        lines.append("  health and metrics (/healthz, /readyz, /metrics; not on the ports above):")
        lines += [f"    {name:<10} {c.ops_url}" for name, c in self.children.items()]
        lines += [
            f"  {'credentials':<12} {creds_path}",
            f"  {'logs':<12} {self.var_dir / 'log'}",
            "`desk status` shows health; Ctrl-C stops everything.",
        ]
        print("\n".join(lines), flush=True)


def run(settings: StackSettings) -> int:
    assert set(SERVICES) == set(SERVICE_SETTINGS)
    desk_logging.configure("stack", settings.log_level, "text")
    try:
        return asyncio.run(Stack(settings).run())
    except (StackError, NatsServerError, TransientError) as exc:
        print(f"desk up: {exc}", file=sys.stderr)
        return 1
