"""Auto-send on the page: what is on, on what evidence, the audits waiting and the trail
(`/autosend`, viewers too), and the audit form of an auto-sent item (reviewers). Turning it on
or off is an admin's API call (`POST /api/autosend/{category}`): it needs an eval report."""

from __future__ import annotations

import asyncio
import logging

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from .. import store
from ..core import inbox_of
from ..outboxes import publish_audits
from . import forms
from .cookies import edge_of, flash_of, session_of
from .responses import error_page, item_url, page, to_login

log = logging.getLogger(__name__)


async def autosend_page(request: Request) -> Response:
    session = await session_of(request)
    if session is None:
        return to_login(request)
    inbox = inbox_of(request)
    overview = await asyncio.to_thread(store.autosend.overview, inbox.engine, inbox.policy)
    context = {"overview": overview, "flash": await flash_of(request, session)}
    return page(request, "autosend.html", context)


async def audit(request: Request) -> Response:
    form, who = await forms.reviewer_form(request)
    item_id = request.path_params["id"]
    back = item_url(item_id)
    inbox = inbox_of(request)
    note = (forms.text(form, "note") or "").strip()
    if len(note) > forms.MAX_TEXT:
        return error_page(request, 422, "Too long", f"At most {forms.MAX_TEXT} characters.", back)
    try:
        found = await asyncio.to_thread(
            store.autosend.audit,
            inbox.engine,
            item_id,
            forms.text(form, "verdict"),
            who.name,
            note,
            inbox.policy,
        )
    except store.NotFound:
        return error_page(request, 404, "Not found", "There is no such auto-sent item.")
    except store.Conflict as exc:
        return error_page(request, 409, "Audited already", str(exc), back)
    except store.Invalid as exc:
        return error_page(request, 422, "Not accepted", str(exc), back)
    await publish_audits(request.app.state.service.connection, inbox.engine)  # else the relay does
    done = f"Audit recorded for {item_id}"
    if found["demoted"]:
        done += f"; auto-send for {found['demoted']['category']} is off (audits found edits)"
        log.warning("auto-send demoted for %s by an audit", found["demoted"]["category"])
    session = await session_of(request)
    if session is not None:
        await asyncio.to_thread(edge_of(request).sessions.flash, session, done)
    return RedirectResponse("/autosend", status_code=303)
