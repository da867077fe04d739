"""What `desk up` prints once the stack is up names the page to open, where the token to log in
with is kept (never the token: the banner may be kept in a log) and the model that drafts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from desk.banner import banner
from desk.broker import Broker
from desk.credentials import load_or_create
from desk.supervisor import ServiceProcess
from shared.settings import DeskSettings, DrafterSettings, InboxApiSettings, StackSettings

pytestmark = pytest.mark.usefixtures("no_desk_env")


def shown(tmp_path: Path, **services: DeskSettings) -> str:
    var = tmp_path / "var"
    creds = load_or_create(var)
    broker = Broker(StackSettings(var_dir=var), var)
    broker.url = "nats://127.0.0.1:14222"
    children = {
        "ingress": ServiceProcess("ingress", 18000, 19000, var / "ingress.log"),
        "inbox_api": ServiceProcess("inbox_api", 18001, 19001, var / "inbox_api.log"),
        "drafter": ServiceProcess("drafter", None, 19002, var / "drafter.log"),
    }
    settings = {"inbox_api": InboxApiSettings(), "drafter": DrafterSettings(), **services}
    return banner(broker, children, creds, var / "log", [], settings)


def test_the_banner_names_the_page_the_token_and_the_offline_model(tmp_path: Path) -> None:
    text = shown(tmp_path)
    lines = text.splitlines()
    creds = tmp_path / "var" / "dev-credentials.json"
    assert "  open         http://127.0.0.1:18001/  the review inbox" in lines
    assert f'  log in with  "reviewer_token" in {creds} ("viewer_token" only reads)' in lines
    assert "  drafts by    the built-in offline model" in text
    tokens = json.loads(creds.read_text())
    assert tokens["reviewer_token"] not in text and tokens["viewer_token"] not in text


def test_the_banner_names_the_operators_model_and_reviewer_tokens(tmp_path: Path) -> None:
    drafter = DrafterSettings(
        llm_base_url="http://llm-user:llm-password@127.0.0.1:8080/v1",  # type: ignore[call-arg]
        llm_model="qwen2.5-7b-instruct",  # type: ignore[call-arg]
    )
    inbox = InboxApiSettings(
        reviewers=[{"name": "ann", "token_sha256": "a" * 64}],  # type: ignore[list-item]
        audit_key="k" * 32,  # type: ignore[arg-type]
    )
    text = shown(tmp_path, drafter=drafter, inbox_api=inbox)
    assert "  drafts by    qwen2.5-7b-instruct at http://127.0.0.1:8080/v1" in text.splitlines()
    assert "llm-password" not in text
    assert "  log in with  your reviewer token (its sha256 is in DESK_REVIEWERS)" in text
