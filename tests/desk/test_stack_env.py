"""What `desk up` hands each service: the report reads the inbox with the operator's token when
one is set, and with the development report token (counts only) only while the development
tokens are the inbox's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from desk.stack import Stack
from desk.supervisor import MALLOC_ARENA_MAX, ServiceProcess, Supervisor
from shared.settings import StackSettings


def _stack(tmp_path: Path) -> Supervisor:
    stack = Stack(StackSettings(_env_file=None, var_dir=tmp_path / "var"))  # type: ignore[call-arg]
    stack.supervisor.children = {
        name: ServiceProcess(name, port, 9000 + n, tmp_path / f"{name}.log")
        for n, (name, port) in enumerate(
            [("inbox_api", 8101), ("reconciler", None), ("drafter", None)]
        )
    }
    stack.broker.url = "nats://127.0.0.1:1"
    stack.supervisor.report_token = "dev-report-token"
    return stack.supervisor


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DESK_REPORT_TOKEN", "DESK_REVIEWERS", "DESK_AUDIT_KEY"):
        monkeypatch.delenv(name, raising=False)


def test_the_report_uses_the_dev_report_token_while_the_dev_tokens_are_the_inbox_s(
    tmp_path: Path,
) -> None:
    stack = _stack(tmp_path)
    assert stack.child_env(stack.children["reconciler"])["DESK_REPORT_TOKEN"] == "dev-report-token"
    assert "DESK_REPORT_TOKEN" not in stack.child_env(stack.children["drafter"])


def test_a_report_token_the_operator_set_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DESK_REPORT_TOKEN", "the-operators-viewer-token")
    stack = _stack(tmp_path)
    env = stack.child_env(stack.children["reconciler"])
    assert env["DESK_REPORT_TOKEN"] == "the-operators-viewer-token"


def test_with_reviewers_configured_the_dev_token_is_not_given_to_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The inbox then refuses the dev token: handing it over would make the report say
    "Inbox: unavailable"."""
    monkeypatch.setenv("DESK_REVIEWERS", '[{"name": "ann", "token_sha256": "' + "a" * 64 + '"}]')
    stack = _stack(tmp_path)
    assert "DESK_REPORT_TOKEN" not in stack.child_env(stack.children["reconciler"])


def test_services_run_with_two_malloc_arenas_unless_the_operator_chose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """glibc's default (eight arenas per core) let the drafter's and the sender's memory creep
    up over a long run (README "Bounded state"); the image sets the same value as `desk up`."""
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    stack = _stack(tmp_path)
    for name in stack.children:
        assert stack.child_env(stack.children[name])["MALLOC_ARENA_MAX"] == "2"
    dockerfile = (Path(__file__).parents[2] / "Dockerfile").read_text()
    assert f"MALLOC_ARENA_MAX={MALLOC_ARENA_MAX} " in dockerfile
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert stack.child_env(stack.children["drafter"])["MALLOC_ARENA_MAX"] == "4"


def test_the_inbox_gets_the_audit_key_desk_up_made_unless_the_operator_set_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Which auto-sent replies are audited is keyed with a secret of the stack's own, kept in
    the credentials file (added to one written before it had the key); no other service gets
    it, and one the operator set wins."""
    creds = tmp_path / "var" / "dev-credentials.json"
    creds.parent.mkdir(parents=True)
    older = {"webhook_secrets": {}, "reviewer_token": "r", "viewer_token": "v"}
    creds.write_text(json.dumps(older))

    def started() -> Supervisor:
        stack = Stack(StackSettings(_env_file=None, var_dir=tmp_path / "var"))  # type: ignore[call-arg]
        stack.load_credentials()  # as `desk up` does first
        stack.supervisor.children = _stack(tmp_path).children
        return stack.supervisor

    supervisor = started()
    made = json.loads(creds.read_text())["audit_key"]
    assert len(made) >= 32
    assert supervisor.child_env(supervisor.children["inbox_api"])["DESK_AUDIT_KEY"] == made
    assert "DESK_AUDIT_KEY" not in supervisor.child_env(supervisor.children["drafter"])
    again = started()  # the next `desk up`: the same key
    assert again.child_env(again.children["inbox_api"])["DESK_AUDIT_KEY"] == made
    monkeypatch.setenv("DESK_AUDIT_KEY", "the-operators-own-audit-key")
    env = again.child_env(again.children["inbox_api"])
    assert env["DESK_AUDIT_KEY"] == "the-operators-own-audit-key"
