"""`desk up` checks every service's settings before it starts anything: a mistake is one line
naming the variable and what is wrong (exit 2), not a service restarting with the reason only in
its log; and its check of an operator's port binds the way the services bind."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from desk import cli
from desk.preflight import check_settings, unknown_variables
from desk.process import free_port
from desk.stack import Stack
from desk.supervisor import SERVICES, Supervisor, public_port
from shared.settings import ConfigError, DrafterSettings, IngressSettings, StackSettings
from tests.services_running import ROOT

pytestmark = pytest.mark.usefixtures("no_desk_env")


def placed(tmp_path: Path, audit_key: str = "") -> Supervisor:
    """The supervisor of a stack with every service placed, as `desk up` does before it starts
    anything."""
    settings = StackSettings(var_dir=tmp_path / "var", ingress_port=0, inbox_api_port=0)
    stack = Stack(settings)
    stack.supervisor.audit_key = audit_key
    stack.supervisor.plan({name: public_port(settings, name) for name in SERVICES})
    return stack.supervisor


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"DESK_REVIEWERS": "{bad"}, "DESK_REVIEWERS: not valid JSON ("),
        ({"DESK_ADMINS": "ana"}, "DESK_ADMINS: not valid JSON ("),
        (
            {"DESK_SLA_TARGETS": '{"vip": 30}'},
            "DESK_SLA_TARGETS: 'vip' is no priority or category (one of low, normal, high, urgent",
        ),
        (
            {"DESK_LLM_BASE_URL": "localhost:8080/v1"},
            "DESK_LLM_BASE_URL must be an http:// or https:// URL",
        ),
        (
            {"DESK_CHAT_FORMAT": "teams"},
            "DESK_CHAT_FORMAT: Input should be 'slack' or 'mattermost'",
        ),
        ({"DESK_AUDIT_KEY": "short"}, "DESK_AUDIT_KEY must be at least 16 characters"),
        (
            {"DESK_CHANNEL": "webhook", "DESK_CHANNEL_URL": "channel.example.com/replies"},
            "DESK_CHANNEL_URL must be an http:// or https:// URL",
        ),
    ],
    ids=lambda v: next(iter(v)) if isinstance(v, dict) else "",
)
def test_a_service_s_bad_setting_is_one_line_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], said: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as refused:
        check_settings(placed(tmp_path))
    message = str(refused.value)
    assert message.startswith(said), message
    assert "\n" not in message
    for value in env.values():
        assert value not in message  # never the value (a setting may be a secret)


def test_the_settings_the_stack_hands_its_services_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reviewers without DESK_AUDIT_KEY: the stack gives the inbox its own key, so that is no
    mistake; the drafter's model is the operator's."""
    monkeypatch.setenv("DESK_REVIEWERS", '[{"name": "ann", "token_sha256": "' + "a" * 64 + '"}]')
    monkeypatch.setenv("DESK_LLM_BASE_URL", "http://127.0.0.1:8080/v1")
    loaded = check_settings(placed(tmp_path, audit_key="k" * 32))
    assert set(loaded) == set(SERVICES)
    drafter = loaded["drafter"]
    assert isinstance(drafter, DrafterSettings)
    assert drafter.llm_base_url == "http://127.0.0.1:8080/v1"


@pytest.mark.parametrize(
    ("env", "said"),
    [
        (
            {"DESK_INGRESS_PORT": "abc"},
            "desk up: DESK_INGRESS_PORT: Input should be a valid integer",
        ),
        (
            {"DESK_INGRESS_PORT": "18123", "DESK_INBOX_API_PORT": "18123"},
            "desk up: DESK_INBOX_API_PORT: 18123 is DESK_INGRESS_PORT too",
        ),
    ],
    ids=["non-numeric port", "shared port"],
)
def test_desk_up_refuses_a_port_mistake_in_one_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    env: dict[str, str],
    said: str,
) -> None:
    monkeypatch.setenv("DESK_VAR_DIR", str(tmp_path / "var"))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert cli.main(["up"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(said)
    assert not (tmp_path / "var").exists()  # nothing started, nothing written


def test_a_service_refuses_its_ops_port_on_its_public_port() -> None:
    port = free_port()
    with pytest.raises(ValidationError, match=r"DESK_OPS_PORT: \d+ is DESK_HTTP_PORT too"):
        IngressSettings(http_port=port, ops_port=port)


@pytest.mark.parametrize("command", [["status"], ["dlq", "list"], ["send-webhook"]])
def test_other_commands_say_a_bad_setting_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    monkeypatch.setenv("DESK_LOG_LEVEL", "loud")
    assert cli.main(command) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"desk {command[0]}: DESK_LOG_LEVEL: Input should be 'DEBUG', ")


def test_desk_up_refuses_before_it_starts_anything(tmp_path: Path) -> None:
    """The real entry point: a mistake only the inbox's settings see (before, the inbox
    restarted with back-off while the reason was in its log)."""
    var = tmp_path / "var"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DESK_")}
    env.update(DESK_VAR_DIR=str(var), DESK_SLA_TARGETS='{"vip": 30}', DESK_INGRESS_PORT="0")
    env["DESK_INBOX_API_PORT"] = "0"
    done = subprocess.run(
        [sys.executable, "-m", "desk", "up"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "desk up: DESK_SLA_TARGETS: 'vip' is no priority or category (one of low, normal, high, "
        "urgent, refund, billing, invoice, bug, account, other) (the inbox_api service)"
    ]
    assert not (var / "nats").exists() and not (var / "helpdesk.sqlite").exists()
    assert not list((var / "log").iterdir())


def test_an_operator_s_port_in_time_wait_is_free_for_the_services(tmp_path: Path) -> None:
    """Right after Ctrl-C the old inbox's connections linger in TIME_WAIT on its port: the
    services bind with SO_REUSEADDR (uvicorn), so the port is theirs, not "busy"."""
    port = free_port()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen()
    client = socket.create_connection(("127.0.0.1", port))
    served, _ = listener.accept()
    served.close()  # the server closes first: its side of the connection waits in TIME_WAIT
    client.recv(1)
    client.close()
    listener.close()
    settings = StackSettings(var_dir=tmp_path / "var", inbox_api_port=port, ingress_port=0)
    assert public_port(settings, "inbox_api") == (port, True)


def test_a_misspelt_variable_is_named_with_the_setting_it_may_mean() -> None:
    """DESK_INBOX_PORT is read by nothing: the inbox would take 8001 while the operator thinks
    it took DESK_INGRESS_PORT's port (the stack still starts)."""
    env = {"DESK_INBOX_PORT": "8000", "DESK_INGRESS_PORT": "8000", "DESK_TOKEN": "t", "HOME": "/"}
    env |= {"LLM_BASE_URL": "http://127.0.0.1:8080/v1", "DESK_SLA_TARGET": "{}", "DESK_XYZ": ""}
    assert unknown_variables(env) == [
        "DESK_INBOX_PORT is no setting of any service (ignored); did you mean DESK_INBOX_API_PORT?",
        "DESK_SLA_TARGET is no setting of any service (ignored); did you mean DESK_SLA_TARGETS?",
        "DESK_XYZ is no setting of any service (ignored)",
    ]
