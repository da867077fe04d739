"""The standing instructions page: what drafts of each category are told, where each came
from (the feedback it was learned from), and the forms that edit, remove or add one. Viewers
read; reviewers change; with auto-send on for a category, a reviewer's new or changed
instruction waits for an admin (`DESK_ADMINS`), who approves or turns it down here. Every
change goes to the drafter at once (`inbox_api.standing`)."""

from __future__ import annotations

import asyncio
import functools
import logging

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from shared.inbox import CATEGORIES

from .. import store
from ..core import inbox_of
from ..standing import publish_standing
from . import forms
from .cookies import edge_of, flash_of, session_of
from .responses import error_page, page, to_login

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
    on = await asyncio.to_thread(store.autosend.on_for, inbox_of(request).engine)
    context = {
        "by_category": by_category,
        "categories": CATEGORIES,
        "autosend": on,
        "can_change": session.user.role == "reviewer",
        "can_approve": session.user.role == "reviewer"
        and session.user.name in inbox_of(request).admins,
        "flash": await flash_of(request, session),
    }
    return page(request, "instructions.html", context)


async def instruction_form(request: Request) -> Response:
    """POST /instructions (write one) or /instructions/{id} (edit or remove it)."""
    form, who = await forms.reviewer_form(request)
    engine = inbox_of(request).engine
    admin = who.name in inbox_of(request).admins
    text = (forms.text(form, "text") or "").strip()
    if len(text) > forms.MAX_TEXT:
        return error_page(request, 422, "Too long", f"At most {forms.MAX_TEXT} characters.", BACK)
    given = request.path_params.get("id")
    try:
        if given is None:
            row = await asyncio.to_thread(
                functools.partial(
                    store.write_instruction,
                    engine,
                    forms.text(form, "category"),
                    text,
                    who.name,
                    admin=admin,
                )
            )
            done = f"Instruction added for {row['category']}"
        else:
            if not given.isdigit():
                return error_page(request, 404, "Not found", "There is no such instruction.", BACK)
            action = forms.text(form, "action")
            if action in ("approve", "reject"):
                if not admin:
                    return error_page(
                        request, 403, "Forbidden", "Only an admin approves instructions.", BACK
                    )
                judge = (
                    store.approve_instruction if action == "approve" else store.reject_instruction
                )
                row = await asyncio.to_thread(judge, engine, int(given), who.name)
                verb = "approved" if action == "approve" else "turned down"
                done = f"Instruction {verb} for {row['category']}"
            else:
                remove = action == "remove"
                row = await asyncio.to_thread(
                    functools.partial(
                        store.change_instruction,
                        engine,
                        int(given),
                        who.name,
                        text=text,
                        remove=remove,
                        admin=admin,
                    )
                )
                done = f"Instruction {'removed' if remove else 'saved'} for {row['category']}"
        if row["status"] == "pending" or row["proposed"] is not None:
            done += ": it reaches drafts once an admin approves it (auto-send is on)"
    except store.NotFound:
        return error_page(
            request, 404, "Not found", "There is no such instruction (any more).", BACK
        )
    except store.Invalid as exc:
        return error_page(request, 422, "Not accepted", str(exc), BACK)
    except store.Conflict as exc:
        return error_page(request, 409, "Nothing to do", str(exc), BACK)
    log.info("%s: standing instruction %s by %s", done, row["id"], who.name)
    published = await publish_standing(request.app.state.service.connection, engine)
    session = await session_of(request)
    if session is not None:
        note = "" if published else " (drafts get it as soon as the broker answers)"
        await asyncio.to_thread(edge_of(request).sessions.flash, session, done + note)
    return RedirectResponse(BACK, status_code=303)
