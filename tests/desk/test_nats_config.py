"""`desk nats-config` prints bcrypt hashes, never passwords: the Secret its output goes into
(desk-nats-auth) holds nothing anyone could log in with, while each service's own Secret holds
its password. Checked on a real nats-server configured with exactly what the command prints."""

from __future__ import annotations

import asyncio
import json
import re
import stat
from pathlib import Path

import pytest

from desk.cli import main
from desk.natsserver import NatsServer
from shared.bus import Bus, NatsAuth
from shared.errors import TransientError
from shared.permissions import ADMIN, USERS


async def logs_in(url: str, user: str, password: str) -> bool:
    try:
        bus = await Bus.connect(
            url, service=user, auth=NatsAuth(user=user, password=password), reconnect=False
        )
    except TransientError:
        return False
    await bus.close()
    return True


def test_the_printed_block_holds_hashes_that_the_passwords_open_and_nothing_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "nats-passwords.json"
    assert main(["nats-config", "--passwords", str(path)]) == 0
    block = capsys.readouterr().out
    passwords = json.loads(path.read_text())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert set(passwords) == {ADMIN, *USERS}
    assert not [user for user, password in passwords.items() if password in block]
    hashes = {entry["user"]: entry["password"] for entry in _users(block)}
    assert set(hashes) == set(passwords)
    assert all(h.startswith("$2a$11$") for h in hashes.values()), "nats-server's own default cost"

    server = NatsServer(tmp_path / "nats", sync_always=False, authorization=block)
    server.start()
    try:

        async def check() -> None:
            for user, password in passwords.items():
                assert await logs_in(server.url, user, password), user
            # what a reader of the Secret desk-nats-auth has: no way in, not even as admin
            assert not await logs_in(server.url, ADMIN, hashes[ADMIN])
            assert not await logs_in(server.url, "router", hashes["router"])

        asyncio.run(check())
    finally:
        server.kill()


def test_a_password_bcrypt_would_cut_short_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "nats-passwords.json"
    secret = "x" * 80
    path.write_text(json.dumps({ADMIN: secret}))
    assert main(["nats-config", "--passwords", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert f"{ADMIN}: " in err and "72 bytes" in err and secret not in err


def _users(block: str) -> list[dict[str, str]]:
    """The user and password of each entry of an `authorization_block`."""
    entries = re.findall(r'\{ user: ("[^"]*"), password: ("[^"]*")', block)
    return [{"user": json.loads(u), "password": json.loads(p)} for u, p in entries]
