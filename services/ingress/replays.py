"""Replays of sources whose signature has no timestamp (GitHub-style, Basic).

A captured request of such a source stays valid for ever. Its event is named by a hash of the
signed body, so the broker's duplicate window (`Nats-Msg-Id`) drops a replay for a while; past
that window the processed-ledger remembers each body for `DESK_ARCHIVE_DAYS` (365), far longer
than EVENTS keeps the event: `replay:<source>:<digest>`.

The ledger is read before the publish and written after the PubAck, never before: a claim
made for an event that then failed to store would turn the sender's retry into a "duplicate"
and lose the event. Two copies racing between the read and the write are one `Nats-Msg-Id`,
which the broker stores once.
"""

from __future__ import annotations

from shared.ledger import Ledger


def replay_key(source: str, digest: str) -> str:
    return f"replay:{source}:{digest}"


class Replays:
    """The ledger half of replay refusal; `ledger` is None until NATS is connected."""

    def __init__(self) -> None:
        self.ledger: Ledger | None = None

    def attach(self, ledger: Ledger) -> None:
        self.ledger = ledger

    @property
    def attached(self) -> bool:
        return self.ledger is not None

    async def seen(self, source: str, digest: str) -> bool:
        """This body was recorded before (`TransientError` if the ledger cannot answer)."""
        assert self.ledger is not None, "attach a ledger first"
        return await self.ledger.seen(replay_key(source, digest))

    async def remember(self, source: str, digest: str, seq: int) -> None:
        """Recorded at `seq` of EVENTS; a body remembered before stays as it was."""
        assert self.ledger is not None, "attach a ledger first"
        await self.ledger.claim(replay_key(source, digest), str(seq).encode())
