"""The drafter service: the one place a model is called; everything around it is deterministic."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import socket

from shared import guidance, outage
from shared.errors import DeskError
from shared.inbox import Audited, Decision
from shared.ledger import Ledger
from shared.service import Service
from shared.settings import DrafterSettings
from shared.source.configured import open_configured
from shared.source.http import HttpSource

from .audits import Audits
from .checkpoints import open_storage, reachable
from .graph import Deps, build_graph
from .handlers import Drafter
from .knowledge import Knowledge
from .model import close_model
from .offline import OfflineDraftModel
from .retention import Retention

log = logging.getLogger(__name__)


async def run(settings: DrafterSettings) -> None:
    source = open_configured(settings)
    deps = Deps.configured(settings, source)
    model = deps.model
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(source.close)
        stack.push_async_callback(close_model, model)
        storage = await stack.enter_async_context(
            open_storage(settings.database_url, settings.var_dir, keep_days=settings.archive_days)
        )
        graph = build_graph().compile(checkpointer=storage.checkpointer, store=storage.store)
        checks = {"database": functools.partial(reachable, storage.checkpointer)}
        health = deps.health
        svc = await stack.enter_async_context(
            Service(settings, checks=checks, degraded=health.degraded if health else None)
        )
        if isinstance(model, OfflineDraftModel):
            log.info("no LLM endpoint configured: drafting with the built-in offline model")
        else:
            log.info(
                "drafting with %s at %s (DESK_LLM_OUTPUT=%s)",
                settings.llm_model,
                settings.llm_base_url,
                settings.llm_output,
            )
        if deps.knowledge is not None and isinstance(source, HttpSource) and source.articles_path:
            await _read_articles(source, deps.knowledge)  # before the first draft is taken
            svc.every(
                settings.knowledge_refetch,
                functools.partial(_read_articles, source, deps.knowledge),
                name="helpdesk articles",
            )
        if svc.bus is None:
            return
        if health is not None:  # for the inbox's banner: drafts wait while the model is down
            writer = outage.Writer(svc.bus.js, f"{svc.name}-{socket.gethostname()}")
            svc.every(5.0, functools.partial(health.report, writer), name="model state")
        ledger = await Ledger.open(svc.bus.js, svc.name, keep=settings.archive_seconds)
        drafter = Drafter(
            svc.bus,
            graph,
            dataclasses.replace(deps, guidance=guidance.Reader(svc.bus.js).read),
            ledger,
            lease_ttl=max(5.0, settings.ack_wait),
            lease_wait=settings.llm_timeout * 2 + 30,
        )
        pruner = Retention(
            graph,
            ledger,
            keep_days=settings.thread_retention_days,
            lease_ttl=max(5.0, settings.ack_wait),
        )
        svc.every(settings.prune_interval, pruner.prune, name="thread retention")
        await svc.consume("drafter", drafter.on_work)
        await svc.consume("drafter-decisions", drafter.on_decision, payload=Decision)
        # an approved reply withdrawn: its round is owed an answer again
        await svc.consume("drafter-results", drafter.on_result)
        # a person's audit of an auto-sent reply: found fine, it becomes an example
        audits = Audits(
            graph,
            ledger,
            lease_ttl=max(5.0, settings.ack_wait),
            lease_wait=settings.llm_timeout * 2 + 30,
        )
        await svc.consume("drafter-audits", audits.on_audit, payload=Audited)
        await svc.until_stopped()


async def _read_articles(source: HttpSource, knowledge: Knowledge) -> None:
    """The helpdesk's articles into the knowledge base; when they cannot be read, the last ones
    read stay (and the next run tries again)."""
    try:
        articles = await source.list_articles()
    except DeskError as exc:
        log.warning("the helpdesk's articles could not be read: %s", exc)
        return
    await asyncio.to_thread(knowledge.set_remote, articles)
