"""Logging in and out: a token exchanged for a new server-side session (wrong tokens throttled
per client address, like the API's), and the session ended."""

from __future__ import annotations

import asyncio
import logging

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ..core import attempt_refused, client_address, inbox_of
from ..sessions import COOKIE
from .cookies import clear_cookie, edge_of, session_of, set_cookie
from .forms import guard, read_form, text
from .responses import error_page, page, to_login

log = logging.getLogger(__name__)


async def home(request: Request) -> Response:
    if await session_of(request) is None:
        return to_login(request)
    return RedirectResponse("/inbox", status_code=303)


async def login_form(request: Request) -> Response:
    if await session_of(request) is not None:
        return RedirectResponse("/inbox", status_code=303)
    return page(request, "login.html", {"error": None})


async def login(request: Request) -> Response:
    form = await read_form(request)
    edge, client = edge_of(request), client_address(request)
    wait = edge.throttle.retry_after(client)
    if wait:
        message = f"Too many wrong tokens from your address; try again in {wait} s."
        answer = error_page(request, 429, "Too many attempts", message, back="/login")
        answer.headers["Retry-After"] = str(wait)
        return answer
    token = (text(form, "token") or "").strip()
    who = inbox_of(request).reviewers.authenticate(token or None)
    if who is None:
        attempt_refused(edge.throttle, client, "web login")
        return page(request, "login.html", {"error": "That token is not valid."}, 401)
    await asyncio.to_thread(edge.sessions.close, request.cookies.get(COOKIE))  # a new id each time
    session_id = await asyncio.to_thread(edge.sessions.open, token)
    log.info("%s logged in to the web inbox from %s", who.name, client)
    answer = RedirectResponse("/inbox", status_code=303)
    set_cookie(answer, edge, session_id)
    return answer


async def logout(request: Request) -> Response:
    form = await read_form(request)
    if await session_of(request) is not None:
        await guard(request, form, "viewer")  # the form is this session's (CSRF)
        await asyncio.to_thread(edge_of(request).sessions.close, request.cookies.get(COOKIE))
        request.state.session = None
    answer = RedirectResponse("/login", status_code=303)
    clear_cookie(request, answer)
    return answer
