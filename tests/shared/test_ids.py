"""Dedup ids are part of the contract other systems and replicas rely on: pin their shapes."""

from __future__ import annotations

import datetime as dt

import pytest

from shared import ids, subjects


def test_dedup_ids_have_the_documented_shapes() -> None:
    assert ids.ingress("helpdesk", "evt_1") == "helpdesk:evt_1"
    assert ids.router("helpdesk:evt_1", "drafter") == "helpdesk:evt_1>drafter"
    assert ids.inbox_item("T1012", "T1012-m1", 2) == "inbox.item:T1012:T1012-m1:v2"
    assert ids.decision("T1012", "T1012-m1", 2) == "decision:T1012:T1012-m1:v2"
    assert ids.outbox("T1012", "T1012-m1", "send_reply") == "T1012/T1012-m1/send_reply"
    # the next round of the same conversation is a different reply
    assert ids.outbox("T1012", "T1012-m3", "send_reply") != ids.outbox(
        "T1012", "T1012-m1", "send_reply"
    )
    assert ids.reconciler("ticket.created", "T1003") == "reconciler:ticket.created:T1003"
    assert ids.stale("T1003", dt.date(2026, 11, 29)) == "cron:stale:T1003:2026-11-29"


def test_subjects_are_built_from_validated_tokens() -> None:
    assert subjects.event("helpdesk", "ticket.created") == "events.helpdesk.ticket.created"
    assert subjects.work("drafter", "ticket.created") == "work.drafter.ticket.created"
    assert subjects.result("reply.sent") == "results.reply.sent"
    assert subjects.dlq("router") == "dlq.router"
    for bad in ("", "a b", "a.*", "a.>", "a..b", ".a"):
        with pytest.raises(subjects.SubjectError):
            subjects.event("helpdesk", bad)
