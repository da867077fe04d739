"""The standing instructions page: what drafts of each category are told, where each came
from (the feedback it was learned from), and the forms that edit, remove or add one. Viewers
read; reviewers change. Every change goes to the drafter at once (`inbox_api.guidance`)."""

from __future__ import annotations

import asyncio
import logging

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from shared.inbox import CATEGORIES

from .. import store
from ..guidance import publish_guidance
from . import forms
from .cookies import edge_of, flash_of, inbox_of, session_of
from .responses import error, page, to_login

log = logging.getLogger(__name__)

BACK = "/instructions"


async def instructions_page(request: Request) -> Response:
    session = await session_of(request)
    if session is None:
        return to_login(request)
    rows = await asyncio.to_thread(store.list_instructions, inbox_of(request).engine)
    by_category: dict[str, list[dict[str, object]]] = {c: [] for c in CATEGORIES}
    for row in rows:
        by_category.setdefault(str(row["category"]), []).append(row)
    context = {
        "by_category": by_category,
        "categories": CATEGORIES,
        "can_change": session.user.role == "reviewer",
        "flash": await flash_of(request, session),
    }
    return page(request, "instructions.html", context)


async def instruction_form(request: Request) -> Response:
    """POST /instructions (write one) or /instructions/{id} (edit or remove it)."""
    checked = await forms.reviewer_form(request)
    if isinstance(checked, Response):
        return checked
    form, who = checked
    engine = inbox_of(request).engine
    text = (forms.text(form, "text") or "").strip()
    if len(text) > forms.MAX_TEXT:
        return error(request, 422, "Too long", f"At most {forms.MAX_TEXT} characters.", BACK)
    given = request.path_params.get("id")
    try:
        if given is None:
            row = await asyncio.to_thread(
                store.write_instruction, engine, forms.text(form, "category"), text, who.name
            )
            done = f"Instruction added for {row['category']}"
        else:
            if not given.isdigit():
                return error(request, 404, "Not found", "There is no such instruction.", BACK)
            remove = forms.text(form, "action") == "remove"
            row = await asyncio.to_thread(
                store.change_instruction, engine, int(given), who.name, text=text, remove=remove
            )
            done = f"Instruction {'removed' if remove else 'saved'} for {row['category']}"
    except store.NotFound:
        return error(request, 404, "Not found", "There is no such instruction (any more).", BACK)
    except store.Invalid as exc:
        return error(request, 422, "Not accepted", str(exc), BACK)
    log.info("%s: standing instruction %s by %s", done, row["id"], who.name)
    published = await publish_guidance(request.app.state.service.bus, engine)
    session = await session_of(request)
    if session is not None:
        note = "" if published else " (drafts get it as soon as the broker answers)"
        await asyncio.to_thread(edge_of(request).sessions.flash, session, done + note)
    return RedirectResponse(BACK, status_code=303)
