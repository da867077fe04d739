"""Ignoring several waiting items at once from the list, after one confirmation.

The list's form names each selected item with the version the reviewer saw (`<id>:<version>`).
Unconfirmed (no script, or a forged post), the answer is a page that lists them and asks once;
confirmed, each is decided `ignore` as if on its own page: one that changed meanwhile, that
someone else has claimed or that is not a draft is skipped and said so, never forced."""

from __future__ import annotations

import asyncio
import logging
import re

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from .. import store
from ..core import inbox_of
from ..outboxes import publish_decision
from . import forms
from .cookies import edge_of, session_of
from .responses import error_page, page

log = logging.getLogger(__name__)

MAX_ITEMS = 100  # one page of the list, and then some
_SELECTED = re.compile(r"(?P<id>[^\s:]{1,300}):(?P<version>[0-9]{1,9})")


async def ignore_selected(request: Request) -> Response:
    form, who = await forms.reviewer_form(request)
    chosen: list[tuple[str, int]] = []
    for value in form.getlist("item"):
        found = _SELECTED.fullmatch(value) if isinstance(value, str) else None
        if found is None:
            return error_page(
                request, 422, "Bad form", "An item in the selection is not one of ours."
            )
        chosen.append((found["id"], int(found["version"])))
    chosen = list(dict.fromkeys(chosen))
    if not chosen:
        return error_page(request, 422, "Nothing selected", "Tick the items to ignore first.")
    if len(chosen) > MAX_ITEMS:
        return error_page(request, 422, "Too many", f"At most {MAX_ITEMS} items at once.")
    if forms.text(form, "confirmed") != "1":
        return page(request, "bulk.html", {"chosen": [f"{i}:{v}" for i, v in chosen]})
    engine = inbox_of(request).engine
    bus = request.app.state.service.connection
    ignored: list[str] = []
    skipped: list[str] = []
    for item_id, version in chosen:
        try:
            decision = await asyncio.to_thread(
                store.decide, engine, item_id, "ignore", None, version, who
            )
        except (store.NotFound, store.Conflict, store.Invalid) as exc:
            skipped.append(f"{item_id} ({exc})")
            continue
        await publish_decision(bus, engine, decision)  # else the relay publishes it
        ignored.append(item_id)
    log.info("%s ignored %d items at once (%d skipped)", who.name, len(ignored), len(skipped))
    said = f"Ignored {len(ignored)} item{'' if len(ignored) == 1 else 's'}"
    if skipped:
        said += f"; skipped {len(skipped)}: " + "; ".join(skipped)
    session = await session_of(request)
    if session is not None:
        await asyncio.to_thread(edge_of(request).sessions.flash, session, said)
    return RedirectResponse("/inbox", status_code=303)
