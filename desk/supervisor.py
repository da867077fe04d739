"""The services as child processes of `desk up`: the ports each gets, the environment each runs
with, starting them, restarting one that dies (with back-off), and stopping them all.

Each child gets an ops port (health and metrics) and, if it has public routes (the catalog's
`public_port`: ingress, inbox_api), a public port; both are picked here so that they are known.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from shared import catalog
from shared.settings import StackSettings

from .broker import Broker
from .errors import StackError
from .helpdesk import DEMO_KNOWLEDGE
from .process import die_with_parent, free_port, port_free, reserve

SERVICES = tuple(s.name for s in catalog.SERVICES if s.supervised)
STABLE_AFTER = 30.0  # a child that ran this long gets its back-off reset
MALLOC_ARENA_MAX = "2"  # the services' malloc arenas (the image sets the same: Dockerfile)


@dataclass
class ServiceProcess:
    """One service as a child of the stack: its ports, its log, and its restarts."""

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


def public_port(settings: StackSettings, name: str) -> tuple[int | None, bool]:
    """(public port, whether it is the operator's choice); None for a service without public
    routes."""
    declared = catalog.spec(name)
    if declared.public_port is None:
        return None, False
    field = declared.port_setting
    port = int(getattr(settings, field)) if field else 0
    if port and port_free(port, as_services_bind=True):  # a socket in TIME_WAIT is no owner
        reserve(port)  # never handed out as another's port (an ops port, a broker's)
        return port, True
    if port and field in settings.model_fields_set:
        # a helpdesk or a reviewer pointed at this port would reach whatever holds it
        raise StackError(
            f"port {port} (DESK_{field.upper()}) is busy: stop what holds it, or choose "
            "another port (0 for any free one)"
        )
    if port:
        print(f"port {port} is busy; {name} takes a free port instead", file=sys.stderr)
    return free_port(), False


class Supervisor:
    """Runs `children` until `stop` is set, then stops them; `restarted()` after each restart."""

    def __init__(
        self,
        settings: StackSettings,
        var_dir: Path,
        broker: Broker,
        stop: asyncio.Event,
        restarted: Callable[[], None],
    ) -> None:
        self.settings = settings
        self.var_dir = var_dir
        self.broker = broker
        self.children: dict[str, ServiceProcess] = {}
        self.report_token = ""  # the development report token: counts only (see child_env)
        self.audit_key = ""  # the inbox's audit key `desk up` made, unless DESK_AUDIT_KEY is set
        self.stopping = False
        self._stop = stop
        self._restarted = restarted

    def plan(self, ports: dict[str, tuple[int | None, bool]]) -> None:
        """Every service with the public port chosen for it and an ops port; nothing starts."""
        for name in SERVICES:
            port, fixed = ports[name]
            self.children[name] = ServiceProcess(
                name, port, free_port(), self.var_dir / "log" / f"{name}.log", fixed=fixed
            )

    async def start(self) -> None:
        """Start every service `plan` placed, and watch each."""
        for child in self.children.values():
            await self._spawn(child)
            child.watcher = asyncio.create_task(self._watch(child))

    def child_env(self, child: ServiceProcess) -> dict[str, str]:
        """The environment `child` runs with: this process's, plus what the stack decides."""
        env = dict(os.environ)
        env.pop("DESK_HTTP_PORT", None)  # only the children with public routes get one
        # glibc's malloc keeps up to 8 arenas per core, one per thread that allocates: over a
        # long run each keeps freed pieces it cannot give back (README "Bounded state"). Two
        # arenas, as the image sets it, unless the operator chose otherwise.
        env.setdefault("MALLOC_ARENA_MAX", MALLOC_ARENA_MAX)
        inbox_url = self.children["inbox_api"].url
        assert inbox_url is not None  # the inbox has public routes
        env.update(
            {
                "DESK_NATS_URL": self.broker.url,
                "DESK_HTTP_HOST": "127.0.0.1",
                **({"DESK_HTTP_PORT": str(child.port)} if child.port is not None else {}),
                "DESK_OPS_PORT": str(child.ops_port),
                "DESK_VAR_DIR": str(self.var_dir),
                "DESK_PROVISION": "false",  # the stack provisions once, before any child starts
                "DESK_INBOX_URL": inbox_url,
                **self.broker.user_env(child.name),
                "PYTHONUNBUFFERED": "1",
            }
        )
        if child.name == "drafter" and not {
            "DESK_KNOWLEDGE_DIR",
            "DESK_HELPDESK_URL",
            "DESK_HELPDESK_KIND",
        } & set(env):  # the demo helpdesk: its team's articles (another's are not the demo's)
            env["DESK_KNOWLEDGE_DIR"] = str(DEMO_KNOWLEDGE)
        if (
            child.name == "reconciler"
            and self.report_token
            and not {
                "DESK_REPORT_TOKEN",
                "DESK_REVIEWERS",
            }
            & set(env)
        ):  # the dev report token, while the dev tokens are the inbox's
            env["DESK_REPORT_TOKEN"] = self.report_token  # the report reads the inbox's counts
        if child.name == "inbox_api" and self.audit_key and not env.get("DESK_AUDIT_KEY"):
            env["DESK_AUDIT_KEY"] = self.audit_key
        return env

    async def _spawn(self, child: ServiceProcess) -> None:
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

    async def _watch(self, child: ServiceProcess) -> None:
        """Restart the child whenever it exits, until the stack stops."""
        while True:
            assert child.proc is not None
            code = await child.proc.wait()
            if self.stopping:
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
            if self.stopping or self._stop.is_set():
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
            self._restarted()

    async def stop(self) -> None:
        """SIGTERM to every child; those still running after the drain timeout (and 5 s) are
        killed."""
        self.stopping = True
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
