"""The stack's broker: the embedded nats-server (one node or a cluster), or the operator's when
`DESK_NATS_URL` names one; the user each service connects as; provisioning the streams once for
all of them; and starting a node again, on the same store, whenever it exits."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

import nats.js.errors as js_errors

from shared.bus import Bus, NatsAuth
from shared.consumer import declared_consumers
from shared.permissions import ADMIN, authorization_block
from shared.settings import StackSettings
from shared.streams import NOT_READY, Topology, provision

from . import credentials
from .errors import StackError
from .natsserver import NatsCluster, NatsServer


class Broker:
    def __init__(self, settings: StackSettings, var_dir: Path) -> None:
        self.settings = settings
        self.var_dir = var_dir
        self.nats: NatsServer | NatsCluster | None = None  # None: an external broker
        self.url = ""
        self.passwords: dict[str, str] = {}  # user -> password, for the embedded broker

    def start(self) -> None:
        """Start the embedded broker, or take the operator's URL."""
        if self.settings.nats_url:
            self.url = self.settings.nats_url
            return
        s = self.settings
        if s.stream_replicas > s.nats_nodes:
            raise StackError(
                f"DESK_STREAM_REPLICAS={s.stream_replicas} needs at least that many broker nodes; "
                f"set DESK_NATS_NODES={s.stream_replicas} (or lower the replicas)"
            )
        # one user per service, each confined to its own subjects
        authorization = authorization_block(self.passwords)
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
        self.url = self.nats.url

    async def provision(self) -> None:
        """The streams, the key-value buckets and every declared consumer, as the admin."""
        s = self.settings
        bus = await Bus.connect(self.url, service="stack", auth=self.auth(ADMIN), reconnect=False)
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
        except js_errors.APIError as exc:  # the broker refused a stream, bucket or consumer
            raise StackError(f"the broker refused to provision the streams: {exc}") from exc
        finally:
            await bus.close()

    def auth(self, user: str) -> NatsAuth:
        if self.nats is None:  # an external broker: the operator's settings apply
            return self.settings.nats_auth()
        return NatsAuth(user=user, password=self.passwords[user])

    def user_env(self, user: str) -> dict[str, str]:
        """The environment a service connects to the embedded broker as `user` with (nothing
        for an external broker: the operator's settings apply)."""
        if self.nats is None:
            return {}
        return {"DESK_NATS_USER": user, "DESK_NATS_PASSWORD": self.passwords[user]}

    @property
    def admin_url(self) -> str:
        """The broker URL with the admin user, for operator commands (kept out of status)."""
        if self.nats is None:
            return self.url
        password = self.passwords[ADMIN]
        return ",".join(f"nats://{ADMIN}:{password}@{n.host}:{n.port}" for n in self.nodes())

    def nodes(self) -> list[NatsServer]:
        if self.nats is None:
            return []
        return self.nats.nodes if isinstance(self.nats, NatsCluster) else [self.nats]

    def description(self) -> str:
        """What the banner says about the broker."""
        s = self.settings
        if self.nats is None:
            return "external"
        nodes = f"{s.nats_nodes}-node cluster, " if s.nats_nodes > 1 else ""
        return f"embedded, {nodes}store {self.nats.store_dir}, sync {s.nats_sync}"

    async def watch(self, stopping: Callable[[], bool], restarted: Callable[[], None]) -> None:
        """Start a node again (same ports, same store) whenever it exits, until `stopping()`."""
        while True:
            await asyncio.sleep(1.0)
            for node in self.nodes():
                if node.running or stopping():
                    continue
                print(
                    f"nats-server {node.name} exited; restarting it on the same store",
                    file=sys.stderr,
                )
                try:
                    await asyncio.to_thread(node.restart, 30.0)
                except RuntimeError as exc:
                    print(f"nats-server restart failed: {exc}", file=sys.stderr)
                restarted()

    def stop(self) -> None:
        if self.nats is not None:
            self.nats.stop()
