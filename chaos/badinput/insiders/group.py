"""The group run: every user's operations tried on a secured nats-server of its own."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Sequence
from pathlib import Path

import nats
import nats.js.errors as js_errors
from nats.aio.client import Client

from shared.permissions import ADMIN, USERS, authorization_block
from shared.streams import Topology, provision

from ...facts import log
from ..tally import InsiderRun, InsiderTally
from .attempts import Attempts
from .inventory import publishers
from .operations import operations
from .probe import REQUEST


async def probe_user(url: str, user: str, password: str, admin: Client) -> InsiderTally:
    """Try each of `user`'s operations; `admin` removes the consumer a config probe is about
    first, so each config meets a consumer that does not exist yet."""
    tally = InsiderTally(user)
    conn = await Attempts.connect(url, user, password)
    js = admin.jetstream()
    try:
        for probe in operations(user):
            if probe.kind == REQUEST:
                stream, durable = probe.subject.split(".")[-2:]
                with contextlib.suppress(js_errors.NotFoundError):
                    await js.delete_consumer(stream, durable)
            refused, strays = await conn.attempt(probe)
            tally.strays += [f"{probe}: {e}" for e in strays]
            if probe.declared:
                tally.controls += 1
                if refused:
                    tally.controls_refused.append(str(probe))
            elif probe.kind == REQUEST:
                tally.configs += 1
                if not refused:
                    tally.configs_accepted.append(str(probe))
            else:
                tally.probes += 1
                if refused:
                    tally.refused += 1
                else:
                    tally.accepted.append(str(probe))
        await conn.settle()
        await asyncio.sleep(0.05)  # a late -ERR would show up now
        tally.strays += [f"{user} after the last probe: {e}" for e in conn.errors]
        if not conn.nc.is_connected:
            tally.strays.append(f"{user}: the connection closed during the probes")
    finally:
        await conn.nc.close()
    return tally


async def probe_server(
    url: str, passwords: dict[str, str], users: Sequence[str] = USERS
) -> InsiderRun:
    """Provision as admin, then try each user's operations on the server at `url`."""
    started = time.monotonic()
    admin = await nats.connect(url, user=ADMIN, password=passwords[ADMIN], allow_reconnect=False)
    run = InsiderRun(publishers=publishers())
    try:
        await provision(admin.jetstream(), Topology())
        for user in users:
            run.users.append(await probe_user(url, user, passwords[user], admin))
    finally:
        await admin.close()
    run.seconds = time.monotonic() - started
    return run


def run_insiders(var: Path, users: Sequence[str] = USERS) -> InsiderRun:
    """The insider group on its own nats-server (store under `var`), with a user for every
    service and role and `admin`, probing `users` (all by default); the server is killed
    afterwards."""
    from desk.natsserver import NatsServer

    passwords = {user: secrets.token_urlsafe(24) for user in (ADMIN, *USERS)}
    server = NatsServer(
        var / "nats",
        sync_always=False,
        log_file=var / "nats-server.log",
        authorization=authorization_block(passwords),
    )
    started = time.monotonic()
    try:
        server.start()
        run = asyncio.run(probe_server(server.url, passwords, users))
    except Exception as exc:
        log(f"insider group error: {exc.__class__.__name__}: {exc}")
        return InsiderRun(error=f"{exc.__class__.__name__}: {exc}")
    finally:
        server.kill()
    run.seconds = time.monotonic() - started
    return run
