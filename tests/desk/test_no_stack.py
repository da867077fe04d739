"""Operator commands that need the broker name it or find the running stack: with neither they
say so and exit 2, never falling back to a broker that happens to listen on the default port."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from desk.credentials import nats_passwords
from desk.natsserver import NatsServer
from shared.permissions import ADMIN, authorization_block
from tests.services_running import ROOT


def desk(env: dict[str, str], command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "desk", *command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "command",
    [
        ["results", "tail", "--count", "1", "--timeout", "2"],
        ["dlq", "list"],
        ["provision"],  # it would create streams on whatever answers on the default port
        ["reconcile", "--stale"],
        ["report"],
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_a_command_without_a_stack_says_so(tmp_path: Path, command: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DESK_")}
    env["DESK_VAR_DIR"] = str(tmp_path / "var")
    done = desk(env, command)
    assert done.returncode == 2, done.stderr
    assert "no running stack found" in done.stderr and "DESK_NATS_URL" in done.stderr
    assert "Traceback" not in done.stderr


def test_commands_on_a_named_broker_log_in_with_the_operators_credentials(tmp_path: Path) -> None:
    """With DESK_NATS_URL, DESK_NATS_USER and DESK_NATS_PASSWORD name an operator's broker and
    user; a command that ignored them would be refused by a broker that requires a login."""
    passwords = nats_passwords()
    server = NatsServer(
        tmp_path / "nats", sync_always=False, authorization=authorization_block(passwords)
    )
    server.start()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DESK_")}
        env.update(
            DESK_VAR_DIR=str(tmp_path / "var"),
            DESK_NATS_URL=server.url,
            DESK_NATS_USER=ADMIN,
            DESK_NATS_PASSWORD=passwords[ADMIN],
        )
        for command in (
            ["provision"],
            ["results", "tail", "--count", "1", "--timeout", "1"],
            ["dlq", "list"],
        ):
            done = desk(env, command)
            assert done.returncode == 0, (command, done.stderr)
            assert "Traceback" not in done.stderr
            assert passwords[ADMIN] not in done.stdout + done.stderr
    finally:
        server.kill()
