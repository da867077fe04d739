"""A small real JSON REST helpdesk (the `http` source system) serving an SqlSource's tickets,
conversations included (`shared/helpdesk/helpdesk.openapi.json` is its contract)."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from shared.errors import PermanentError
from shared.helpdesk.sql import SqlSource

TOKEN = "Bearer s3cret-token"


# The help centre's articles at /articles (one that does not fit the contract, to be skipped).
ARTICLES: list[dict[str, Any]] = [
    {
        "id": "kb-4711",
        "title": "Charged twice? Pending holds explained",
        "category": "billing",
        "tags": ["charged twice", "pending"],
        "url": "https://help.example.com/articles/4711",
        "body": "# Pending holds\n\nA retried payment can leave a pending hold that disappears "
        "by itself within 3 to 5 business days.",
    },
    {"id": "kb-broken", "body": "no title"},
]


def helpdesk_app(source: SqlSource, release: asyncio.Event) -> Starlette:
    """The tickets API in two dialects (the defaults, and other names under /v2) with an auth
    check; a ticket as a helpdesk without conversations sends it (`/plain`, no `messages`) and
    with its messages newest first (`/reversed`); plus endpoints that misbehave on purpose."""

    def authorised(request: Request, header: str) -> bool:
        return request.headers.get(header) == TOKEN

    def tickets(header: str, items: str, next_: str, since: str, after: str, limit: str) -> Any:
        async def handler(request: Request) -> Response:
            if not authorised(request, header):
                return JSONResponse({"error": "unauthorised"}, status_code=401)
            q = request.query_params
            try:
                page = await source.list_tickets(
                    updated_since=dt.datetime.fromisoformat(q[since]) if since in q else None,
                    cursor=q.get(after),
                    limit=int(q.get(limit, "100")),
                )
            except PermanentError:
                return JSONResponse({"error": "bad cursor"}, status_code=400)
            return JSONResponse(
                {items: [t.model_dump(mode="json") for t in page.tickets], next_: page.next_cursor}
            )

        return handler

    def ticket(header: str, shape: str = "full") -> Any:
        async def handler(request: Request) -> Response:
            if not authorised(request, header):
                return JSONResponse({"error": "unauthorised"}, status_code=401)
            try:
                found = await source.get_ticket(request.path_params["id"])
            except PermanentError:
                return JSONResponse({"error": "not found"}, status_code=404)
            answer = found.model_dump(mode="json")
            if shape == "plain":
                del answer["messages"]
            elif shape == "reversed":
                answer["messages"].reverse()
            return JSONResponse(answer)

        return handler

    async def unavailable(request: Request) -> Response:
        return Response("down for maintenance", status_code=503)

    async def busy(request: Request) -> Response:
        return Response("slow down", status_code=429, headers={"Retry-After": "7"})

    async def slow(request: Request) -> Response:
        await release.wait()
        return Response("{}", media_type="application/json")

    async def garbage(request: Request) -> Response:
        return Response("<html>surprise</html>", media_type="text/html")

    async def articles(request: Request) -> Response:
        if not authorised(request, "Authorization"):
            return JSONResponse({"error": "unauthorised"}, status_code=401)
        return JSONResponse({"articles": ARTICLES})

    default = ("Authorization", "tickets", "next_cursor", "updated_since", "cursor", "limit")
    v2 = ("X-Api-Key", "items", "next", "since", "after", "per_page")
    return Starlette(
        routes=[
            Route("/tickets", tickets(*default)),
            Route("/articles", articles),
            Route("/tickets/{id}", ticket("Authorization")),
            Route("/v2/issues", tickets(*v2)),
            Route("/v2/issues/{id}/detail", ticket("X-Api-Key")),
            Route("/plain/tickets/{id}", ticket("Authorization", "plain")),
            Route("/reversed/tickets/{id}", ticket("Authorization", "reversed")),
            Route("/unavailable/{id}", unavailable),
            Route("/busy/{id}", busy),
            Route("/slow/{id}", slow),
            Route("/garbage/{id}", garbage),
        ]
    )
