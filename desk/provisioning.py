"""What the broker is given: its streams, buckets and consumers (`desk provision`, idempotent),
and its users (`desk nats-config`, an authorization block with bcrypt hashes)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from shared.bus import NatsAuth
from shared.settings import DeskSettings


def add_arguments(subparsers: Any) -> None:
    """Register `provision` and `nats-config` on the `desk` parser's sub-parsers."""
    subparsers.add_parser("provision", help="create or update streams and buckets")
    nats_config = subparsers.add_parser(
        "nats-config",
        help="print a nats-server authorization block, one user per service (bcrypt hashes)",
    )
    nats_config.add_argument(
        "--passwords",
        type=Path,
        required=True,
        help="JSON file {user: password}; created with random passwords (mode 0600) if missing",
    )


def nats_config(path: Path) -> int:
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


def provision(nats_url: str, auth: NatsAuth) -> int:
    from shared import streams
    from shared.bus import Bus, without_credentials
    from shared.consumer import declared_consumers
    from shared.errors import TransientError

    settings = DeskSettings()

    async def go() -> dict[str, str]:
        bus = await Bus.connect(nats_url, service="provision", auth=auth, reconnect=False)
        try:
            return dict(
                await streams.provision(
                    bus.js,
                    streams.Topology(settings.stream_replicas, settings.duplicate_window),
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
