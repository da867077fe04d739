"""Operator commands that need the broker name it or find the running stack: with neither they
say so and exit 2, never falling back to a broker that happens to listen on the default port."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from desk import cli
from desk.credentials import nats_passwords
from desk.natsserver import NatsServer
from shared import subjects
from shared.bus import Bus
from shared.permissions import ADMIN, authorization_block
from tests import forkserver
from tests.helpers import eventually
from tests.services_running import ROOT


def desk(env: dict[str, str], command: list[str]) -> subprocess.CompletedProcess[str]:
    return forkserver.run(command, env=env, cwd=ROOT)


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


def test_an_explicit_port_that_is_busy_stops_desk_up_naming_it(tmp_path: Path) -> None:
    """A helpdesk pointed at DESK_INGRESS_PORT would reach whatever holds it, were the stack to
    take another port instead: `desk up` refuses to start."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("DESK_")}
        env.update(DESK_VAR_DIR=str(tmp_path / "var"), DESK_INGRESS_PORT=str(port))
        done = desk(env, ["up"])
    assert done.returncode == 1, done.stderr
    assert f"port {port} (DESK_INGRESS_PORT) is busy" in done.stderr
    assert "Traceback" not in done.stderr and "Ambient Desk is up" not in done.stdout
    assert not (tmp_path / "var" / "nats").exists(), "nothing started"


def test_send_webhook_mistakes_are_one_line_on_stderr(tmp_path: Path) -> None:
    var = tmp_path / "var"
    var.mkdir()
    (var / "creds.json").write_text(json.dumps({"webhook_secrets": {"helpdesk": "whsec_x"}}))
    state = {"services": {"ingress": {"url": "http://127.0.0.1:9"}}, "credentials": ""}
    state["credentials"] = str(var / "creds.json")
    (var / "stack.json").write_text(json.dumps(state))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DESK_")}
    env["DESK_VAR_DIR"] = str(var)

    unknown = desk(env, ["send-webhook", "--source", "nosuch"])
    assert unknown.returncode == 2
    assert unknown.stderr.strip() == (
        "desk send-webhook: the running stack has no secret for source 'nosuch' "
        "(its sources: helpdesk); pass --secret"
    )
    malformed = desk(env, ["send-webhook", "--secret", "whsec_not!base64"])
    assert malformed.returncode == 1
    [line] = malformed.stderr.strip().splitlines()
    assert line.startswith("desk send-webhook: the secret cannot sign a standard webhook: ")
    assert "not!base64" not in line


async def test_one_ctrl_c_stops_results_tail_at_once_without_a_traceback(tmp_path: Path) -> None:
    """`desk results tail` is the example subscriber people copy: Ctrl-C must just stop it."""
    server = NatsServer(tmp_path / "nats", sync_always=False)
    server.start()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DESK_")}
        env.update(DESK_VAR_DIR=str(tmp_path / "var"), DESK_NATS_URL=server.url)
        assert desk(env, ["provision"]).returncode == 0
        bus = await Bus.connect(server.url, service="test")
        try:
            before = len(await bus.js.consumers_info(subjects.RESULTS))
            tail = subprocess.Popen(
                [sys.executable, "-m", "desk", "results", "tail"],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )

            async def subscribed() -> bool:
                return len(await bus.js.consumers_info(subjects.RESULTS)) > before

            await eventually(subscribed, timeout=20, message="the tail subscribed")
            tail.send_signal(signal.SIGINT)
            try:
                _, err = await asyncio.to_thread(tail.communicate, timeout=10)
            except subprocess.TimeoutExpired:
                tail.kill()
                raise AssertionError("one Ctrl-C did not stop `desk results tail`") from None
        finally:
            await bus.close()
        assert tail.returncode == 0, err
        assert "Traceback" not in err
    finally:
        server.kill()


@pytest.mark.usefixtures("no_desk_env")
@pytest.mark.timeout(30)  # before, the service ran on whatever answered on 127.0.0.1:4222
@pytest.mark.parametrize("command", [["router"], ["ingress", "imap"]], ids=" ".join)
def test_a_service_without_a_named_broker_says_so(
    capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    assert cli.main(command) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"desk {command[0]}: DESK_NATS_URL is not set: start the whole system with `desk up`, "
        "or set DESK_NATS_URL to the broker this service is to use"
    ]
