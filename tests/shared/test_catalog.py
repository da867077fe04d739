"""Everything derived from `shared.catalog` agrees with it: a service's needs are declared once."""

from __future__ import annotations

from sqlmodel import SQLModel

from chaos.harness import stack as harness
from desk import cli, stack
from services.inbox_api import store as inbox_store
from services.sender import notifications
from services.sender import store as sender_store
from shared import catalog, permissions, subjects
from shared.streams import Topology


def test_the_supervisor_the_cli_and_the_fault_suite_know_the_declared_services() -> None:
    supervised = tuple(s.name for s in catalog.SERVICES if s.supervised)
    assert stack.SERVICES == supervised
    assert harness.SERVICES == supervised  # every service the stack runs may be killed
    assert set(cli.ALIASES.values()) == set(catalog.SERVICE_SETTINGS)
    for spec in catalog.SERVICES:
        assert spec.settings is not None and spec.settings.service == spec.name
        parsed = cli._parser().parse_args([spec.name.replace("_", "-")])
        assert cli.ALIASES[parsed.command] == spec.name


def test_every_user_has_exactly_the_grants_its_declaration_implies() -> None:
    assert set(permissions.USERS) == {s.name for s in catalog.ROLES}
    for spec in catalog.ROLES:
        granted = permissions.service_permissions(spec.name).publish
        for c in spec.consumers:
            assert f"$JS.API.CONSUMER.MSG.NEXT.{c.stream}.{c.durable}" in granted
        for other in catalog.ROLES:
            if other is spec:
                continue
            for c in other.consumers:  # nobody may touch a consumer it does not own
                assert not [g for g in granted if f".{c.stream}.{c.durable}" in g], (spec, c)
        assert not [g for g in granted if ".CONSUMER.DELETE." in g], spec.name
        kv_writes = {g.split(".")[1] for g in granted if g.startswith("$KV.")}
        assert kv_writes == set(spec.buckets_written()), spec.name
        if spec.dead_letters:
            assert subjects.dlq(spec.name) in granted
        assert not [g for g in granted if g.startswith("dlq.") and g != subjects.dlq(spec.name)]


def test_buckets_are_provisioned_per_writer() -> None:
    provisioned = {b.bucket for b in Topology().buckets()}
    assert provisioned == set(catalog.BUCKETS)
    for spec in catalog.SERVICES:
        for bucket in spec.kv_reads:
            assert bucket in provisioned


def test_the_tables_a_service_owns_are_the_tables_it_creates() -> None:
    def names(*tables: object) -> set[str]:
        return {t.name for t in tables}  # type: ignore[attr-defined]

    inbox = names(*inbox_store.TABLES)
    sender = names(*(t for t in SQLModel.metadata.sorted_tables if t.name.startswith("sender_")))
    assert inbox == set(catalog.INBOX_API.tables)
    assert sender == set(catalog.SENDER.tables)
    assert notifications.NotificationRow.__tablename__ in catalog.SENDER.tables
    assert sender_store.OutboxRow.__tablename__ in catalog.SENDER.tables


def test_replay_may_return_a_letter_only_to_a_subject_some_service_consumes() -> None:
    inbox_api = permissions.service_permissions("inbox_api").publish
    data = [g for g in inbox_api if not g.startswith("$") and not g.startswith("dlq.")]
    assert set(data) == {subjects.INBOX_DECISION, *catalog.CONSUMED}
    assert subjects.ALL_RESULTS not in data and "events.>" not in data
