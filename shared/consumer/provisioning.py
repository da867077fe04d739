"""Consumers as an admin provisions them, and a service binding to the one provisioned for it."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

import nats.errors as nats_errors
import nats.js.errors as js_errors
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from .. import catalog
from ..bus import Bus
from ..errors import TransientError
from .declaration import Consumer, Delivery

log = logging.getLogger(__package__)  # "shared.consumer": one logger for the whole runtime


async def await_provisioned(bus: Bus, c: Consumer) -> None:
    """A service with its own NATS user may not create or change consumers (a create
    request could point a push consumer at any subject): wait for the one provisioned."""
    deadline = time.monotonic() + 60.0
    while True:
        try:
            info = await bus.js.consumer_info(c.stream, c.name)
            break
        except (js_errors.NotFoundError, nats_errors.TimeoutError, TimeoutError):
            if time.monotonic() > deadline:
                raise TransientError(
                    f"consumer {c.stream}/{c.name} does not exist: run `desk provision`"
                ) from None
            await asyncio.sleep(0.5)
    want, got = c.config(), info.config
    if (got.ack_wait, got.max_deliver, got.deliver_subject) != (
        want.ack_wait,
        want.max_deliver,
        None,
    ) or set(got.filter_subjects or [got.filter_subject]) != set(c.subjects):
        log.warning(
            "consumer %s/%s differs from this service's settings; `desk provision` updates it",
            c.stream,
            c.name,
        )


async def _never(delivery: Delivery[Any]) -> None:  # pragma: no cover - provisioning only
    raise AssertionError("a provisioning spec is never consumed")


def declared_consumers(options: Mapping[str, Any]) -> list[tuple[str, ConsumerConfig]]:
    """Every consumer the catalog declares, as an admin provisions it (`consumer_options()` of
    the provisioning process's settings: the stack and the provision job share the services'
    configuration). Outside subscribers get a plain durable on their stream."""
    configs = []
    for role in catalog.ROLES:
        for declared in role.consumers:
            consumer = Consumer.of(declared, _never, **options)
            config = consumer.config()
            if role.settings is None:  # an outside system: no grace delivery, no dead letters
                config = ConsumerConfig(
                    name=declared.durable,
                    durable_name=declared.durable,
                    ack_policy=AckPolicy.EXPLICIT,
                    deliver_policy=DeliverPolicy.ALL,
                    filter_subject=declared.subjects[0],
                )
            configs.append((declared.stream, config))
    return configs
