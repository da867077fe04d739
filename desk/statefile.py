"""`var/stack.json`: where the running stack is (its broker, each service's URLs and pid, the
credentials file), for `desk status` and the other operator commands. Written whole and renamed
into place, readable only by its owner (it holds the admin URL); while its pid lives, a second
stack on the same var dir is refused."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from .broker import Broker
from .errors import StackError
from .process import alive
from .supervisor import ServiceProcess

STATE_FILE = "stack.json"


class StateFile:
    def __init__(self, var_dir: Path) -> None:
        self.var_dir = var_dir
        self.path = var_dir / STATE_FILE

    def refuse_second_stack(self) -> None:
        if not self.path.exists():
            return
        try:
            pid = int(json.loads(self.path.read_text()).get("pid", 0))
        except (ValueError, OSError):
            pid = 0
        if pid and pid != os.getpid() and alive(pid):
            raise StackError(
                f"a stack is already running from {self.var_dir} (pid {pid}); "
                "stop it first or set DESK_VAR_DIR"
            )

    def write(self, broker: Broker, children: dict[str, ServiceProcess], creds_path: Path) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.touch(mode=0o600)  # it holds the admin URL
        tmp.write_text(json.dumps(contents(broker, children, creds_path), indent=2))
        tmp.replace(self.path)

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def contents(
    broker: Broker, children: dict[str, ServiceProcess], creds_path: Path
) -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "nats_url": broker.url,
        "nats_admin_url": broker.admin_url,
        "embedded_nats": broker.nats is not None,
        "nats_nodes": [
            {"name": n.name, "url": n.url, "pid": n.proc.pid if n.proc else None}
            for n in broker.nodes()
        ],
        "credentials": str(creds_path),
        "services": {
            name: {"url": c.url, "ops_url": c.ops_url, "pid": c.proc.pid if c.proc else None}
            for name, c in children.items()
        },
    }
