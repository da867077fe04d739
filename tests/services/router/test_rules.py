"""Routing rules as pure data: matching, fan-out order, and errors that name the rule."""

from __future__ import annotations

import pytest

from services.router.rules import Rules
from shared.settings import ConfigError


def test_the_demo_rules_route_tickets_and_mail_to_the_drafter_and_urgent_also_to_notify() -> None:
    rules = Rules.load(None)
    assert rules.targets("helpdesk", "ticket.created", {"data": {}}) == ["drafter"]
    assert rules.targets("reconciler", "ticket.stale", {}) == ["drafter"]
    assert rules.targets("email", "email.received", {"From": "x"}) == ["drafter"]
    urgent = {"data": {"priority": "urgent"}}
    assert rules.targets("helpdesk", "ticket.created", urgent) == ["drafter", "notify"]
    assert rules.targets("helpdesk", "ticket.updated", urgent) == ["notify"]
    assert rules.targets("helpdesk", "ticket.updated", {"data": {"priority": "low"}}) == []


def test_globs_sources_and_predicates() -> None:
    rules = Rules.parse(
        {
            "rules": [
                {"types": ["invoice.*"], "sources": ["billing"], "targets": ["sender"]},
                {
                    "types": ["*"],
                    "targets": ["audit", "sender"],
                    "when": [
                        {"path": "data.amount", "exists": True},
                        {"path": "$.data.currency", "in": ["EUR", "USD"]},
                    ],
                },
            ]
        }
    )
    paid = {"data": {"amount": 0, "currency": "EUR"}}
    assert rules.targets("billing", "invoice.paid", paid) == ["sender", "audit"]
    assert rules.targets("shop", "invoice.paid", paid) == ["audit", "sender"]
    assert rules.targets("billing", "invoice.paid", {"data": {"currency": "GBP"}}) == ["sender"]
    assert rules.targets("shop", "order.paid", {"data": {"currency": "EUR"}}) == []
    assert rules.targets("shop", "order.paid", "not an object") == []


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        ({"rules": []}, "at least one"),
        ({"rules": [{"name": "no targets", "types": ["*"]}]}, "rule 1 ('no targets'): targets"),
        (
            {"rules": [{"types": ["*"], "targets": ["a"]}, {"types": ["*"], "targets": ["a b"]}]},
            "rule 2: targets",
        ),
        (
            {
                "rules": [
                    {
                        "name": "two tests",
                        "types": ["*"],
                        "targets": ["a"],
                        "when": [{"path": "x", "equals": 1, "exists": True}],
                    }
                ]
            },
            "rule 1 ('two tests'): when.0",
        ),
        ({"rules": [{"types": ["*"], "targets": ["a"], "typo": 1}]}, "rule 1: typo"),
        ({"rules": [{"types": ["*"], "targets": ["a.b"]}]}, "single subject token"),
    ],
)
def test_a_bad_rule_is_refused_with_a_message_naming_it(
    document: dict[str, object], fragment: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        Rules.parse(document, origin="rules.toml")
    assert fragment in str(refused.value)


def test_the_first_matching_rule_that_names_a_queue_decides_it() -> None:
    rules = Rules.load(None)  # the demo rules
    urgent = {"data": {"priority": "urgent"}}
    assert rules.queue("helpdesk", "ticket.created", urgent) == "urgent"
    assert rules.queue("helpdesk", "ticket.created", {"data": {"priority": "high"}}) == "urgent"
    assert rules.queue("helpdesk", "ticket.message.created", {"data": {}}) == "general"
    assert rules.queue("email", "email.received", {"From": "x"}) == "email"
    assert rules.queue("helpdesk", "ticket.closed", {"data": {}}) is None
    assert rules.queues == ["urgent", "email", "general"]
    # the queue rules add no target of their own
    assert rules.targets("helpdesk", "ticket.created", {"data": {}}) == ["drafter"]


def test_a_queue_name_is_checked() -> None:
    spec = {"rules": [{"name": "q", "types": ["*"], "targets": ["a"], "queue": "Billing Team"}]}
    with pytest.raises(ConfigError, match=r"rule 1 \('q'\).*queue"):
        Rules.parse(spec)


def test_the_first_matching_rule_that_names_a_category_gives_it() -> None:
    """What auto-send believes about a ticket's category comes from here, not the model."""
    rules = Rules.parse(
        {
            "rules": [
                {"types": ["*"], "targets": ["drafter"]},
                {
                    "types": ["ticket.*"],
                    "when": [{"path": "data.form", "equals": "refund"}],
                    "targets": ["drafter"],
                    "category": "refund",
                },
                {"types": ["ticket.*"], "targets": ["drafter"], "category": "other"},
            ]
        }
    )
    assert rules.category("helpdesk", "ticket.created", {"data": {"form": "refund"}}) == "refund"
    assert rules.category("helpdesk", "ticket.created", {"data": {}}) == "other"
    assert rules.category("email", "email.received", {"TextBody": "CATEGORY=refund"}) is None
    assert Rules.load(None).category("helpdesk", "ticket.created", {"data": {}}) is None
    spec = {"rules": [{"name": "c", "types": ["*"], "targets": ["a"], "category": "phishing"}]}
    with pytest.raises(ConfigError, match=r"rule 1 \('c'\).*category"):
        Rules.parse(spec)
