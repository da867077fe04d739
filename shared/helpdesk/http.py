"""The `http` source: a generic JSON REST helpdesk, read with one `httpx.AsyncClient`.

A ticket is the `Ticket` model's JSON: the customer nested, and the conversation under
`messages` (oldest first; optional: without it the ticket's `body` is its one, opening message).
A list answer is an object holding the tickets under `items_key` and the next page's cursor under
`next_key` (null on the last page). The contract, machine-readable: `helpdesk.openapi.json`
next to this module (`CONTRACT`).

Errors are mapped here: 404 on a ticket → `ticket_not_found`; any other status by
`shared.answers` (408, 409, 425, 429 and 5xx → `TransientError` with the Retry-After, other 4xx
→ `PermanentError`); timeouts and connection failures → `TransientError`; malformed answers →
`PermanentError`. The auth value goes into a header and nowhere else (no log, no message).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import TypeAdapter, ValidationError

from .. import answers, clock
from ..errors import PermanentError, TransientError
from .base import Article, Ticket, TicketPage, ticket_not_found

_TICKETS = TypeAdapter(list[Ticket])

CONTRACT = Path(__file__).with_name("helpdesk.openapi.json")  # the API this source reads


def in_order(ticket: Ticket) -> Ticket:
    """The ticket with its messages oldest first (a stable sort by `created_at`): the contract
    asks for that order, and rounds depend on it, so a helpdesk listing newest first is mended."""
    ordered = sorted(ticket.messages, key=lambda m: m.created_at)
    return ticket if ordered == ticket.messages else ticket.model_copy(update={"messages": ordered})


class HttpSource:
    def __init__(
        self,
        base_url: str,
        *,
        tickets_path: str = "/tickets",
        ticket_path: str = "/tickets/{id}",
        articles_path: str | None = None,
        auth_header: str = "Authorization",
        auth_value: str | None = None,
        connect_timeout: float = 3.0,
        read_timeout: float = 10.0,
        items_key: str = "tickets",
        next_key: str = "next_cursor",
        updated_since_param: str = "updated_since",
        cursor_param: str = "cursor",
        limit_param: str = "limit",
    ) -> None:
        self.tickets_path = tickets_path
        self.ticket_path = ticket_path
        self.articles_path = articles_path
        self.items_key = items_key
        self.next_key = next_key
        self.updated_since_param = updated_since_param
        self.cursor_param = cursor_param
        self.limit_param = limit_param
        self._client = httpx.AsyncClient(
            base_url=base_url,
            headers={auth_header: auth_value} if auth_value else None,
            timeout=httpx.Timeout(read_timeout, connect=connect_timeout),
            follow_redirects=False,
        )

    async def get_ticket(self, ticket_id: str) -> Ticket:
        path = self.ticket_path.format(id=quote(ticket_id, safe=""))
        response = await self._get(path, {})
        if response.status_code == 404:
            raise ticket_not_found(ticket_id)
        self._check(response, path)
        try:
            return in_order(Ticket.model_validate_json(response.content))
        except ValidationError as exc:
            raise PermanentError(f"malformed ticket from the source at {path}") from exc

    async def list_tickets(
        self,
        *,
        updated_since: dt.datetime | None = None,
        cursor: str | None = None,
        limit: int = 100,
    ) -> TicketPage:
        params: dict[str, str] = {self.limit_param: str(limit)}
        if updated_since is not None:
            since = clock.aware(updated_since)
            params[self.updated_since_param] = since.astimezone(dt.UTC).isoformat()
        if cursor is not None:
            params[self.cursor_param] = cursor
        path = self.tickets_path
        response = await self._get(path, params)
        self._check(response, path)
        try:
            answer: Any = response.json()
            items = answer[self.items_key]
            next_cursor = answer.get(self.next_key)
            if next_cursor is not None and not isinstance(next_cursor, str):
                raise TypeError(f"{self.next_key} is not a string")
            tickets = _TICKETS.validate_python(items)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            # json decode and pydantic validation errors are ValueErrors
            raise PermanentError(f"malformed ticket list from the source at {path}") from exc
        return TicketPage(tickets=[in_order(t) for t in tickets], next_cursor=next_cursor or None)

    async def list_articles(self) -> list[Article]:
        """The help centre's articles (`{"articles": [...]}`); none without an articles path.
        An article that does not fit the contract is skipped, the rest kept."""
        if not self.articles_path:
            return []
        path = self.articles_path
        response = await self._get(path, {})
        self._check(response, path)
        try:
            items = response.json()["articles"]
            if not isinstance(items, list):
                raise TypeError("articles is not a list")
        except (ValueError, KeyError, TypeError) as exc:
            raise PermanentError(f"malformed article list from the source at {path}") from exc
        found = []
        for item in items:
            try:
                found.append(Article.model_validate(item))
            except ValidationError:
                continue
        return found

    async def close(self) -> None:
        await self._client.aclose()

    async def _get(self, path: str, params: dict[str, str]) -> httpx.Response:
        try:
            return await self._client.get(path, params=params)
        except httpx.TimeoutException as exc:
            raise TransientError(f"source timed out on GET {path}") from exc
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            raise PermanentError(f"bad source URL for GET {path}") from exc
        except httpx.TransportError as exc:
            raise TransientError(f"source unreachable on GET {path}: {type(exc).__name__}") from exc

    @staticmethod
    def _check(response: httpx.Response, path: str) -> None:
        status = response.status_code
        answers.raise_for(status, f"source answered {status} on GET {path}", response.headers)
