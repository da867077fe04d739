"""Standing instructions: what reviewers keep asking for in a category, given to every draft.

The inbox owns them (it sees every reviewer's feedback, and reviewers edit or remove them
there) and publishes the active ones as one value in the `desk_guidance` key-value bucket; the
drafter reads that value for each draft, and may not write it. The value is rewritten whole
from the inbox's table after every change, so a lost write is mended by the next one.
"""

from __future__ import annotations

import logging

import nats.js.errors as js_errors
from nats.js import JetStreamContext
from nats.js.kv import KeyValue
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .catalog import STANDING
from .errors import Unavailable
from .ledger import FAILURES

log = logging.getLogger(__name__)

BUCKET = STANDING
KEY = "instructions"


class Instruction(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: int
    category: str
    text: str


class StandingInstructions(BaseModel):
    """The active standing instructions, per category."""

    model_config = ConfigDict(frozen=True)

    instructions: list[Instruction] = Field(default_factory=list)

    def by_category(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for i in self.instructions:
            found.setdefault(i.category, []).append(i.text)
        return found


async def read(js: JetStreamContext) -> StandingInstructions:
    """The active instructions (none yet: empty)."""
    return await Reader(js).read()


class Reader:
    """Reads the instructions again for each call, keeping the bucket it found: a draft costs
    the broker one read, not a bucket lookup as well."""

    def __init__(self, js: JetStreamContext) -> None:
        self.js = js
        self._kv: KeyValue | None = None

    async def read(self) -> StandingInstructions:
        try:
            if self._kv is None:
                self._kv = await self.js.key_value(BUCKET)
            entry = await self._kv.get(KEY)
        except js_errors.KeyNotFoundError:
            return StandingInstructions()
        except js_errors.NotFoundError:  # no bucket (yet, or any more): look for it next time
            self._kv = None
            return StandingInstructions()
        except FAILURES as exc:
            raise Unavailable("the standing instructions are unavailable") from exc
        return _parsed(entry.value)


def _parsed(value: bytes | None) -> StandingInstructions:
    try:
        return StandingInstructions.model_validate_json(value or b"{}")
    except ValidationError as exc:  # drafts go on without them; the inbox's next write mends it
        log.warning("the standing instructions cannot be read: %s", exc.errors()[0]["msg"])
        return StandingInstructions()


async def write(js: JetStreamContext, instructions: StandingInstructions) -> None:
    try:
        kv = await js.key_value(BUCKET)
        await kv.put(KEY, instructions.model_dump_json().encode())
    except FAILURES as exc:
        raise Unavailable("the standing instructions cannot be published") from exc
