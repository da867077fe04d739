"""Whether the model answers: the drafter's view of its endpoint, for everyone who waits on it.

The drafter writes one value per replica in the `desk_model` key-value bucket when its breaker
opens or closes, and again every minute while the model is down; the inbox reads them for its
banner ("drafts are delayed: the model has been down since …"). A value not rewritten for
`STALE` seconds is a drafter that went away, not an outage: it is ignored.
"""

from __future__ import annotations

import datetime as dt
import logging

import nats.js.errors as js_errors
from nats.js import JetStreamContext
from nats.js.kv import KeyValue
from pydantic import BaseModel, ConfigDict, ValidationError

from .catalog import MODEL
from .ledger import FAILURES

log = logging.getLogger(__name__)

BUCKET = MODEL
STALE = 180.0  # seconds: a down report older than this is from a drafter that is gone
REFRESH = 60.0  # seconds: how often a drafter rewrites its report while the model is down


class ModelState(BaseModel):
    """What one drafter replica knows of the model endpoint."""

    model_config = ConfigDict(frozen=True)

    up: bool
    since: dt.datetime  # when it went down (or came back)
    reason: str = ""  # the last failure, one line, redacted
    at: dt.datetime  # when this was written

    def fresh(self, now: dt.datetime | None = None) -> bool:
        now = now or dt.datetime.now(dt.UTC)
        return (now - self.at).total_seconds() < STALE


def key(replica: str) -> str:
    """A replica's key: its name with what a key may not hold replaced."""
    cleaned = "".join(c if c.isalnum() or c in "-_" else "_" for c in replica)
    return cleaned or "drafter"


class Writer:
    """A drafter's reports; a failed write is logged and mended by the next one."""

    def __init__(self, js: JetStreamContext, replica: str) -> None:
        self.js = js
        self.key = key(replica)
        self._kv: KeyValue | None = None

    async def write(self, state: ModelState) -> None:
        try:
            if self._kv is None:
                self._kv = await self.js.key_value(BUCKET)
            await self._kv.put(self.key, state.model_dump_json().encode())
        except js_errors.NotFoundError:
            self._kv = None
            log.warning("the %s bucket is missing: run `desk provision`", BUCKET)
        except FAILURES as exc:
            log.warning("the model's state was not written (%s)", exc.__class__.__name__)


class Reader:
    """The reports of every drafter replica, read again on each call."""

    def __init__(self, js: JetStreamContext) -> None:
        self.js = js
        self._kv: KeyValue | None = None

    async def down(self) -> ModelState | None:
        """The earliest fresh report of the model being down, if any replica says so."""
        try:
            if self._kv is None:
                self._kv = await self.js.key_value(BUCKET)
            # the keys from the bucket's stream (`KeyValue.keys()` would create a consumer,
            # which a reader of the bucket may not)
            info = await self.js.stream_info(f"KV_{BUCKET}", subjects_filter=f"$KV.{BUCKET}.>")
            subjects = (info.state.subjects or {}) if info.state else {}
            keys = [s.removeprefix(f"$KV.{BUCKET}.") for s in subjects]
            entries = [await self._kv.get(k) for k in keys]
        except js_errors.KeyNotFoundError:  # deleted between the two reads
            return None
        except js_errors.NotFoundError:
            self._kv = None
            return None
        except FAILURES as exc:
            log.debug("the model's state could not be read (%s)", exc.__class__.__name__)
            return None
        found: list[ModelState] = []
        for entry in entries:
            try:
                state = ModelState.model_validate_json(entry.value or b"")
            except ValidationError:
                continue
            if not state.up and state.fresh():
                found.append(state)
        return min(found, key=lambda s: s.since) if found else None
