"""DESK_KNOWLEDGE_FLOOR: the knowledge base's relevance floor is a validated setting the
drafter searches with."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from desk.helpdesk import DEMO_KNOWLEDGE
from services.drafter import Deps, prompt
from shared.settings import DrafterSettings

from .test_floor import demo_round


def test_the_floor_is_a_validated_setting_the_drafter_searches_with() -> None:
    query = prompt.query(*demo_round("T1003"))
    # with no floor, the crash report is offered the refund policy (it mentions photos)
    everything = Deps.configured(
        DrafterSettings(knowledge_dir=DEMO_KNOWLEDGE, knowledge_floor=0),
        source=None,  # type: ignore[arg-type]
    )
    assert everything.knowledge is not None
    assert [p.article for p in everything.knowledge.search(query)][:1] == ["refunds"]
    default = Deps.configured(DrafterSettings(knowledge_dir=DEMO_KNOWLEDGE), source=None)  # type: ignore[arg-type]
    assert default.knowledge is not None and default.knowledge.search(query) == []
    for bad in (-0.1, 1.5):
        with pytest.raises(ValidationError, match="knowledge_floor"):
            DrafterSettings(knowledge_floor=bad)
    assert "0 to 1" in str(DrafterSettings.model_fields["knowledge_floor"].description)
