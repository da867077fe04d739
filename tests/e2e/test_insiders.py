"""The bad-input campaign's insider group: each NATS user, on a real secured nats-server, is
refused every publish, subscription, consumer and bucket operation outside its declaration in
`shared.catalog`, and granted what the declaration gives (the positive controls)."""

from __future__ import annotations

from pathlib import Path

import pytest

from chaos.badinput import insiders, main
from chaos.badinput.insiders import PUBLISH, REQUEST, SUBSCRIBE, controls, probes
from shared import catalog, permissions, subjects
from shared.catalog import ROLES, matches
from shared.permissions import USERS, Permissions, service_permissions

API = "$JS.API"


def subjects_of(user: str, kind: str = PUBLISH) -> set[str]:
    return {p.subject for p in probes(user) if p.kind == kind}


@pytest.mark.parametrize("user", USERS)
def test_every_user_has_probes_for_every_other_roles_consumers(user: str) -> None:
    tried = subjects_of(user)
    others = [(o.name, c) for o in ROLES if o.name != user for c in o.consumers]
    assert others, "no other role owns a consumer: the probe set would be trivial"
    for _owner, c in others:
        s, d = c.stream, c.durable
        for subject in (
            f"{API}.CONSUMER.CREATE.{s}.{d}",
            f"{API}.CONSUMER.INFO.{s}.{d}",
            f"{API}.CONSUMER.MSG.NEXT.{s}.{d}",
            f"{API}.CONSUMER.DELETE.{s}.{d}",
            *(f"{API}.CONSUMER.CREATE.{s}.{d}.{f}" for f in c.subjects),
        ):
            assert subject in tried, (user, subject)
        assert any(t.startswith(f"$JS.ACK.{s}.{d}.") for t in tried), (user, s, d)


@pytest.mark.parametrize("user", USERS)
def test_every_user_is_probed_on_buckets_streams_subjects_and_inboxes(user: str) -> None:
    spec = catalog.spec(user)
    tried, subscribed = subjects_of(user), subjects_of(user, SUBSCRIBE)
    written = set(spec.buckets_written())
    for bucket in insiders.buckets():
        assert (f"$KV.{bucket}.insider" in tried) == (bucket not in written), bucket
    for stream in insiders.streams():
        for op in ("CREATE", "UPDATE", "DELETE", "PURGE"):
            assert f"{API}.STREAM.{op}.{stream}" in tried, (stream, op)
        assert (f"{API}.STREAM.MSG.DELETE.{stream}" in tried) == (stream not in spec.deletes)
        readable = stream in insiders.readable(spec)
        assert (f"{API}.DIRECT.GET.{stream}" in tried) == (not readable), stream
    families = insiders.data_subjects()
    assert {"inbox.item", "inbox.decision", subjects.result("report.daily")} <= set(families)
    assert all(f"dlq.{r.name}" in families for r in ROLES)
    for subject in families:
        assert (subject in tried) == (not insiders.may_publish(spec, subject)), subject
    assert {">", "_INBOX.>", *subjects.STREAM_SUBJECTS[subjects.EVENTS]} <= subscribed
    assert all(f"_INBOX_{other}.>" in subscribed for other in USERS if other != user)
    assert len(probes(user)) > 300
    assert controls(user), "a user without a positive control could pass vacuously"


def _grants(perms: Permissions, subject: str) -> bool:
    return any(matches(g, subject) for g in perms.publish)


@pytest.mark.parametrize("user", USERS)
def test_probes_and_controls_agree_with_the_derived_grants_on_paper(user: str) -> None:
    """The static twin of the live run: no probed publish falls under one of the user's
    publish grants, and every control does (or is its own inbox)."""
    perms = service_permissions(user)
    granted = [p for p in probes(user) if p.kind == PUBLISH and _grants(perms, p.subject)]
    assert granted == []
    for p in controls(user):
        if p.kind == PUBLISH:
            assert _grants(perms, p.subject), p
        else:
            assert any(matches(g, p.subject) or g == p.subject for g in perms.subscribe), p


def test_every_user_is_refused_everything_outside_its_declaration(tmp_path: Path) -> None:
    run = insiders.run_insiders(tmp_path)
    assert not run.error
    assert [u.user for u in run.users] == list(USERS)
    for u in run.users:
        assert u.accepted == [], u.accepted[:10]
        assert u.controls_refused == [], u.controls_refused
        assert u.strays == [], u.strays[:5]
        expected = [p for p in probes(u.user) if p.kind != REQUEST]
        assert u.probes == u.refused == len(expected), u.user
        assert u.controls == len(controls(u.user)) > 0
    assert run.ok
    assert run.seconds < 30, run.seconds


def test_a_grant_wider_than_the_declaration_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Non-vacuity: give the drafter one publish too many and the group reports it."""
    real = permissions.service_permissions

    def loosened(service: str) -> Permissions:
        perms = real(service)
        if service == "drafter":
            return Permissions(publish=[*perms.publish, "results.>"], subscribe=perms.subscribe)
        return perms

    monkeypatch.setattr(permissions, "service_permissions", loosened)
    run = insiders.run_insiders(tmp_path, users=("drafter",))
    (drafter,) = run.users
    assert not run.ok
    assert drafter.accepted
    assert all(" results." in a for a in drafter.accepted), drafter.accepted
    assert any("results.reply.sent" in a for a in drafter.accepted)
    assert not drafter.controls_refused and not drafter.strays


def test_the_group_runs_alone_from_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--only", "insiders"]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.startswith("INSIDER ")]
    assert [r[1] for r in rows[1:]] == list(USERS), out
    assert all(r[3] == "0" for r in rows[1:]), out  # the accepted column
    assert "PASS no accepted insider operation: 0 accepted" in out
    assert "PASS insider controls granted" in out
    assert "FAIL " not in out
    assert "badinput: OK" in out
