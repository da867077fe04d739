"""Trying a probe on one user's connection: refused when the server names it in a permissions
violation (see the package's docstring for why each probe is flushed twice)."""

from __future__ import annotations

import contextlib
import json

import nats
import nats.errors as nats_errors
from nats.aio.client import Client

from shared.bus import NatsAuth

from .probe import PUBLISH, REQUEST, SUBSCRIBE, Probe


class Attempts:
    """One user's connection and the errors its `error_cb` has been handed."""

    def __init__(self, nc: Client, errors: list[str]) -> None:
        self.nc = nc
        self.errors = errors

    @classmethod
    async def connect(cls, url: str, user: str, password: str) -> Attempts:
        errors: list[str] = []

        async def record(exc: Exception) -> None:
            errors.append(str(exc))

        nc = await nats.connect(
            url,
            name=f"badinput-insider-{user}",
            error_cb=record,
            allow_reconnect=False,
            max_reconnect_attempts=0,
            **NatsAuth(user=user, password=password).options(user),
        )
        return cls(nc, errors)

    async def settle(self) -> None:
        """Everything sent so far has been processed by the server and any -ERR for it seen.
        Two flushes: nats-py's first PING may overtake a PUB still in its pending buffer."""
        await self.nc.flush(timeout=5)
        await self.nc.flush(timeout=5)

    async def attempt(self, probe: Probe) -> tuple[bool, list[str]]:
        """(refused, stray errors). Refused: a permissions violation naming this probe."""
        self.errors.clear()
        subscription = None
        answer: dict[str, object] = {}
        if probe.kind == PUBLISH:
            await self.nc.publish(probe.subject, probe.payload)
        elif probe.kind == SUBSCRIBE:
            subscription = await self.nc.subscribe(probe.subject, queue=probe.queue)
        else:  # a request: refused at once if the server says so, else wait for its answer
            inbox = self.nc.new_inbox()
            replies = await self.nc.subscribe(inbox, max_msgs=1)
            await self.nc.publish(probe.subject, probe.payload, reply=inbox)
            await self.settle()
            if not any(_violation(probe) in e for e in self.errors):
                try:
                    reply = await replies.next_msg(timeout=2)
                    answer = json.loads(reply.data)
                except (TimeoutError, nats_errors.Error, ValueError) as exc:
                    answer = {"error": f"no answer ({exc.__class__.__name__})"}
            with contextlib.suppress(nats_errors.Error):
                await replies.unsubscribe()
        await self.settle()
        if subscription is not None:
            await subscription.unsubscribe()
            await self.settle()
        mine = _violation(probe)
        refused = any(mine in e for e in self.errors)
        strays = [e for e in self.errors if mine not in e]
        self.errors.clear()
        if probe.kind == REQUEST and answer.get("error"):
            refused = True
        return refused, strays


def _violation(probe: Probe) -> str:
    """The text nats-py's error_cb gets (lowercased) when the server refuses `probe`."""
    subject = json.dumps(probe.subject)  # Go's %q, for the subjects we use
    if probe.kind == SUBSCRIBE:
        text = f"permissions violation for subscription to {subject}"
        if probe.queue:
            text += f" using queue {json.dumps(probe.queue)}"
    else:
        text = f"permissions violation for publish to {subject}"
    return text.lower()
