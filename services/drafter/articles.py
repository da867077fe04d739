"""The helpdesk's articles in the knowledge base: read before the first draft is taken, then
again every DESK_KNOWLEDGE_REFETCH seconds."""

from __future__ import annotations

import asyncio
import logging

from shared.errors import DeskError
from shared.helpdesk.http import HttpSource

from .knowledge import Knowledge

log = logging.getLogger(__name__)


async def read(source: HttpSource, knowledge: Knowledge) -> None:
    """The helpdesk's articles into the knowledge base; when they cannot be read, the last ones
    read stay (and the next run tries again)."""
    try:
        articles = await source.list_articles()
    except DeskError as exc:
        log.warning("the helpdesk's articles could not be read: %s", exc)
        return
    await asyncio.to_thread(knowledge.set_remote, articles)
