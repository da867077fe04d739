"""A decision and a newer version of the same round, at the same moment: the newer version wins
and the decision is refused (409). Before, the decision's write went over the "superseded" the
projection had just written, and the item stayed "sending" for good: the sender refuses a
decision on an older version, so no result would ever end it."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlmodel import Session

from services.inbox_api import store
from services.inbox_api.store.tables import ItemRow
from shared.db import make_engine
from tests.inbox_items import draft_item


@pytest.mark.parametrize("kind", ["accept", "ignore"])
def test_a_newer_version_projected_while_a_decision_is_made_wins(tmp_path: Path, kind: str) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'inbox.sqlite'}")
    store.create_tables(engine)
    older, newer = draft_item("T1131", 2, round_id="m2"), draft_item("T1131", 3, round_id="m2")
    store.project(engine, older)

    def meanwhile(session: Session, row: ItemRow) -> bool:
        """Between reading the item and recording the decision, the drafter's newer version
        of the round is projected (another connection, committed)."""
        store.project(engine, newer)
        return True

    with pytest.raises(store.Conflict, match="newer version"):
        store.decide(
            engine,
            older.id,
            kind,
            None,
            2,
            store.Reviewer("ana", "reviewer"),
            auto=meanwhile,  # the one hook between the read and the write
        )
    with Session(engine) as session:
        assert session.get(ItemRow, older.id).status == "superseded"  # type: ignore[union-attr]
        assert session.get(ItemRow, newer.id).status == "waiting"  # type: ignore[union-attr]
    engine.dispose()
