"""Who may call the inbox API, and the refusals every route shares: a route declares the role it
needs (`requires`), which answers 401, 403 or 429 for a token that may not, and hands the
handler the token's reviewer; the store's refusals and a body that is not the route's model are
raised as their answers (`HTTPError`).

Reading needs any reviewer token (`viewer` or `reviewer`); deciding and replaying dead letters
need the `reviewer` role; the counts (`/api/stats`) also take the daily report's `reporter`
token, which reads nothing else. The reviewer's name comes from the token, never from the client.
A client address that keeps presenting wrong tokens gets 429 (see `throttle`).
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response

from shared.errors import first_error
from shared.http import HTTPError

from .. import store
from ..auth import bearer
from ..core import attempt_refused, client_address, inbox_of, perimeter

Role = Literal["reporter", "viewer", "reviewer"]
Endpoint = Callable[[Request], Awaitable[Response]]
Handler = Callable[[Request, store.Reviewer], Awaitable[Response]]  # given the reviewer


def authorize(request: Request, role: Role) -> store.Reviewer:
    """The token's reviewer, if it may act as `role`; else the refusal (401, 403, 429)."""
    token = bearer(request.headers.get("authorization"))
    if token is None:
        raise HTTPError(401, "a reviewer token is required", headers={"WWW-Authenticate": "Bearer"})
    edge, client = perimeter(request.app), client_address(request)
    wait = edge.throttle.retry_after(client)
    if wait:
        raise HTTPError(
            429,
            f"too many wrong tokens from your address; retry in {wait} s",
            headers={"Retry-After": str(wait)},
        )
    reviewers = inbox_of(request).reviewers
    reviewer = reviewers.authenticate(token)
    if reviewer is None and (reporter := reviewers.reporter(token)) is not None:
        if role == "reporter":
            return reporter
        raise HTTPError(403, "this token reads the counts (/api/stats) only")
    if reviewer is None:
        attempt_refused(edge.throttle, client, "API token")
        raise HTTPError(
            401,
            "this token is not a reviewer's (unknown, or removed from DESK_REVIEWERS)",
            headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
        )
    if role == "reviewer" and reviewer.role != "reviewer":
        raise HTTPError(403, "this token may read the inbox but not decide")
    return reviewer


def requires(role: Role) -> Callable[[Handler], Endpoint]:
    """The route answers only a token that may act as `role` (`authorize`); its handler is
    given the token's reviewer."""

    def decorate(handler: Handler) -> Endpoint:
        @functools.wraps(handler)
        async def endpoint(request: Request) -> Response:
            return await handler(request, authorize(request, role))

        return endpoint

    return decorate


async def in_store(call: Any, *args: Any, missing: str | None = None, **kwargs: Any) -> Any:
    """`call(*args, **kwargs)` off the event loop; the store's refusals raised as their
    answers (404 with `missing`, or the store's words; 409; 422)."""
    try:
        return await asyncio.to_thread(functools.partial(call, *args, **kwargs))
    except store.NotFound as exc:
        raise HTTPError(404, missing or str(exc)) from None
    except store.claims.Claimed as exc:  # who holds it, for a client to show or to take over
        until = exc.until.isoformat()
        raise HTTPError(409, str(exc), claimed_by=exc.reviewer, until=until) from None
    except store.Conflict as exc:
        raise HTTPError(409, str(exc)) from None
    except store.Invalid as exc:
        raise HTTPError(422, str(exc)) from None


Parsed = TypeVar("Parsed", bound=BaseModel)


def parsed(model: type[Parsed], raw: bytes) -> Parsed:
    """A JSON request body as `model`, or the 400 (not JSON) / 422 (not that shape) answer."""
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        status = 400 if exc.errors()[0]["type"] == "json_invalid" else 422
        raise HTTPError(status, first_error(exc, "body")) from None


async def json_object(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError:
        raise HTTPError(400, "the body is not JSON") from None
    if not isinstance(body, dict):
        raise HTTPError(422, "body: an object is expected")
    return body
