"""Form posts: from this site only (Origin, else Referer, names this host), within a size, read
without a 500 whatever they hold, and, once logged in, carrying the session's CSRF token."""

from __future__ import annotations

import hmac
import logging
import re
from typing import Literal
from urllib.parse import urlsplit

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request

from shared.http import HTTPError

from .. import store
from .cookies import clear_cookie, session_of
from .responses import error_page

log = logging.getLogger(__name__)

MAX_FORM_BYTES = 256 * 1024
MAX_TEXT = 20_000

_PORTS = {"http": 80, "https": 443}


def same_origin(request: Request) -> bool:
    """False when a browser says the form was posted from another site: the Origin header (else
    the Referer) must name this request's Host. Without either it is no browser's form post."""
    origin = request.headers.get("origin") or request.headers.get("referer")
    if origin is None:
        return True
    try:
        sent = urlsplit(origin)
        scheme = sent.scheme.lower()
        here = urlsplit("//" + request.headers.get("host", ""))
        default = _PORTS.get(scheme)
        return (
            default is not None
            and sent.hostname is not None
            and (sent.hostname, sent.port or default) == (here.hostname, here.port or default)
        )
    except ValueError:  # a port that is not a number, a malformed IPv6 host
        return False


async def read_form(request: Request) -> FormData:
    """The posted form; else the refusal (an `HTTPError`, rendered as a page)."""
    if not same_origin(request):
        log.warning("form post to %s from another site refused", request.url.path)
        raise HTTPError(403, "This form was sent from another site.", title="Refused")
    length = request.headers.get("content-length", "")
    if re.fullmatch(r"[0-9]+", length) and int(length) > MAX_FORM_BYTES:
        raise HTTPError(413, "That form is larger than this page accepts.", title="Too large")
    try:
        return await request.form(max_files=0, max_fields=20)
    except HTTPException as exc:
        raise HTTPError(400, str(exc.detail), title="Bad form") from None
    except (UnicodeDecodeError, ValueError):
        raise HTTPError(400, "The form could not be read.", title="Bad form") from None


def text(form: FormData, name: str) -> str | None:
    value = form.get(name)
    if not isinstance(value, str):
        return None
    return value.replace("\r\n", "\n").replace("\r", "\n")


def version(form: FormData) -> int | None:
    given = text(form, "version") or ""
    return int(given) if re.fullmatch(r"[0-9]{1,9}", given) and int(given) >= 1 else None


async def guard(
    request: Request, form: FormData, role: Literal["viewer", "reviewer"]
) -> store.Reviewer:
    """The session's user, if logged in, the form carries the session's CSRF token, and the
    role suffices; otherwise the refusal (an `HTTPError`, rendered as a page)."""
    session = await session_of(request)
    if session is None:
        answer = error_page(request, 401, "Log in first", "Your session has ended.", back="/login")
        clear_cookie(request, answer)
        raise HTTPError.sending(answer)
    who = session.user
    sent = text(form, "csrf") or ""
    if not hmac.compare_digest(sent.encode(), session.csrf.encode()):
        message = "This form is not from your current session; reload."
        raise HTTPError(403, message, title="Form expired")
    if role == "reviewer" and who.role != "reviewer":
        raise HTTPError(403, "Your token may read the inbox but not decide.", title="Read only")
    return who


async def reviewer_form(request: Request) -> tuple[FormData, store.Reviewer]:
    """A reviewer's form: read, from this session, by someone who may decide; else the
    refusal (an `HTTPError`)."""
    form = await read_form(request)
    return form, await guard(request, form, "reviewer")
