"""The drafter service: the one place a model is called; everything around it is deterministic."""

from __future__ import annotations

import dataclasses
import functools
import socket

from shared import outage, standing
from shared.helpdesk.configured import open_configured
from shared.helpdesk.http import HttpSource
from shared.service import Service
from shared.settings import DrafterSettings

from . import articles
from .audits import Audits
from .checkpoints import open_storage, reachable
from .graph import Deps, build_graph
from .handlers import Drafter
from .model import announce, close_model
from .retention import Retention


async def run(settings: DrafterSettings) -> None:
    source = open_configured(settings)
    deps = Deps.configured(settings, source)
    health = deps.health  # None for the offline model: it is never down
    svc = Service(settings, degraded=health.degraded if health else None)
    svc.on_close(source.close)
    svc.on_close(functools.partial(close_model, deps.model))
    storage = await svc.enter(
        open_storage(settings.database_url, settings.var_dir, keep_days=settings.archive_days)
    )
    svc.check("database", functools.partial(reachable, storage.checkpointer))
    graph = build_graph().compile(checkpointer=storage.checkpointer, store=storage.store)
    async with svc:
        announce(deps.model, settings)
        if deps.knowledge is not None and isinstance(source, HttpSource) and source.articles_path:
            read = functools.partial(articles.read, source, deps.knowledge)
            await read()  # before the first draft is taken
            svc.every(settings.knowledge_refetch, read, name="helpdesk articles")
        if health is not None:  # for the inbox's banner: drafts wait while the model is down
            writer = outage.Writer(svc.bus.js, f"{svc.name}-{socket.gethostname()}")
            svc.every(5.0, functools.partial(health.report, writer), name="model state")
        deps = dataclasses.replace(deps, standing=standing.Reader(svc.bus.js).read)
        lease_ttl, lease_wait = max(5.0, settings.ack_wait), settings.llm_timeout * 2 + 30
        drafter = Drafter(
            svc.bus, graph, deps, svc.ledger, lease_ttl=lease_ttl, lease_wait=lease_wait
        )
        pruner = Retention(
            graph, svc.ledger, keep_days=settings.thread_retention_days, lease_ttl=lease_ttl
        )
        svc.every(settings.prune_interval, pruner.prune, name="thread retention")
        audits = Audits(graph, svc.ledger, lease_ttl=lease_ttl, lease_wait=lease_wait)
        await svc.consume("drafter", drafter.on_work)
        await svc.consume("drafter-decisions", drafter.on_decision)
        await svc.consume("drafter-results", drafter.on_result)  # a reply withdrawn: owed again
        await svc.consume("drafter-audits", audits.on_audit)  # a fine one: an example
        await svc.until_stopped()
