"""What a request carries: the inbox and its perimeter (the app's), and the session cookie:
which live session it names, and setting or dropping it.

The cookie (SameSite=strict, HttpOnly) holds only a random id; the session itself lives in the
inbox's database (see `inbox_api.sessions`) and is looked up once per request.
"""

from __future__ import annotations

import asyncio
import math

from starlette.requests import Request
from starlette.responses import Response

from .. import store
from ..core import Perimeter, perimeter
from ..sessions import COOKIE, WebSession


def edge_of(request: Request) -> Perimeter:
    return perimeter(request.app)


async def session_of(request: Request) -> WebSession | None:
    """The request's live session, if its cookie names one (looked up once per request)."""
    try:
        cached: WebSession | None = request.state.session
        return cached
    except AttributeError:
        pass
    found = await asyncio.to_thread(edge_of(request).sessions.find, request.cookies.get(COOKIE))
    request.state.session = found
    return found


async def flash_of(request: Request, session: WebSession) -> str | None:
    """The session's one-time message, taken: the next page does not show it again."""
    if session.flash is not None:
        await asyncio.to_thread(edge_of(request).sessions.flash, session, None)
    return session.flash


def user_of(request: Request) -> store.Reviewer | None:
    """The user of the session `session_of` found (None before it was asked, or without one)."""
    session: WebSession | None = getattr(request.state, "session", None)
    return session.user if session else None


def set_cookie(response: Response, edge: Perimeter, session_id: str) -> None:
    lifetime = math.ceil(edge.sessions.lifetime.total_seconds())
    response.set_cookie(
        COOKIE,
        session_id,
        max_age=lifetime,
        path="/",
        secure=edge.cookie_secure,
        httponly=True,
        samesite="strict",
    )


def clear_cookie(request: Request, response: Response) -> None:
    if COOKIE in request.cookies:
        edge = edge_of(request)
        response.delete_cookie(
            COOKIE, path="/", secure=edge.cookie_secure, httponly=True, samesite="strict"
        )
