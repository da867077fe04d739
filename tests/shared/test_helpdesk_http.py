"""The `http` source against a real helpdesk API: Starlette on uvicorn, backed by the demo data."""

from __future__ import annotations

import asyncio
import datetime as dt
import email.utils
import inspect
import json
import socket
import typing
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import openapi_spec_validator
import pytest
from pydantic import BaseModel
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from shared import answers
from shared.errors import PermanentError, TransientError
from shared.helpdesk import Customer, Message, Ticket, TicketPage
from shared.helpdesk.base import Article
from shared.helpdesk.demo import TICKETS
from shared.helpdesk.http import CONTRACT, HttpSource
from shared.helpdesk.sql import SqlSource
from shared.http import HttpServer
from tests.helpdesk_server import ARTICLES, TOKEN, helpdesk_app

ORDERED = sorted(TICKETS, key=lambda t: (t.updated_at, t.id))


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[str]:
    """The helpdesk API's base URL."""
    source = SqlSource(f"sqlite:///{tmp_path}/helpdesk.db")
    source.create_tables()
    source.seed_demo()
    release = asyncio.Event()
    server = HttpServer(helpdesk_app(source, release), "127.0.0.1", 0)
    await server.start()
    try:
        yield server.url
    finally:
        release.set()
        await server.stop()
        await source.close()


def client(base_url: str, **options: Any) -> HttpSource:
    return HttpSource(base_url, **{"auth_value": TOKEN, **options})


@pytest.fixture
async def source(api: str) -> AsyncIterator[HttpSource]:
    made = client(api)
    try:
        yield made
    finally:
        await made.close()


async def list_all(source: HttpSource, limit: int) -> tuple[list[Ticket], int]:
    found: list[Ticket] = []
    cursor, pages = None, 0
    while True:
        page = await source.list_tickets(cursor=cursor, limit=limit)
        found.extend(page.tickets)
        pages += 1
        if page.next_cursor is None:
            return found, pages
        cursor = page.next_cursor


def demo(ticket_id: str) -> Ticket:
    return next(t for t in TICKETS if t.id == ticket_id)


async def test_get_ticket(source: HttpSource) -> None:
    ticket = await source.get_ticket("T1033")
    assert ticket == demo("T1033")
    assert ticket.customer.name == "李娜"
    assert ticket.updated_at.tzinfo is not None


async def test_get_ticket_reads_the_conversation(source: HttpSource) -> None:
    ticket = await source.get_ticket("T1008")
    assert ticket == demo("T1008")
    assert [m.author for m in ticket.messages] == [
        "customer",
        "agent",
        "customer",
        "agent",
        "agent",
    ]
    assert all(m.created_at.tzinfo is not None for m in ticket.messages)


async def test_a_ticket_without_messages_is_its_opening_message(api: str) -> None:
    source = client(api, ticket_path="/plain/tickets/{id}")
    try:
        ticket = await source.get_ticket("T1003")
    finally:
        await source.close()
    full = demo("T1003")
    assert len(full.messages) == 3
    assert ticket.messages == [full.messages[0]]  # id T1003-m1, the body, the customer's name
    assert ticket.model_copy(update={"messages": full.messages}) == full


async def test_messages_listed_newest_first_are_put_in_order(api: str) -> None:
    source = client(api, ticket_path="/reversed/tickets/{id}")
    try:
        assert await source.get_ticket("T1018") == demo("T1018")
    finally:
        await source.close()


async def test_a_missing_ticket_is_permanent(source: HttpSource) -> None:
    with pytest.raises(PermanentError, match="T9999 does not exist"):
        await source.get_ticket("T9999")


async def test_pages_cover_every_ticket_once(source: HttpSource) -> None:
    assert await list_all(source, limit=10) == (ORDERED, 5)


async def test_paths_keys_parameters_and_auth_header_are_configurable(api: str) -> None:
    source = client(
        api,
        tickets_path="/v2/issues",
        ticket_path="/v2/issues/{id}/detail",
        auth_header="X-Api-Key",
        items_key="items",
        next_key="next",
        updated_since_param="since",
        cursor_param="after",
        limit_param="per_page",
    )
    try:
        assert (await source.get_ticket("T1041")).subject == "Question about my invoice"
        assert await list_all(source, limit=7) == (ORDERED, 6)
        since = dt.datetime(2026, 11, 25, tzinfo=dt.UTC)
        page = await source.list_tickets(updated_since=since)
        assert page.tickets == [t for t in ORDERED if t.updated_at >= since]
    finally:
        await source.close()


async def test_updated_since(source: HttpSource) -> None:
    since = dt.datetime(2026, 11, 20, 9, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    page = await source.list_tickets(updated_since=since, limit=100)
    assert page.next_cursor is None
    assert page.tickets == [t for t in ORDERED if t.updated_at >= since]
    assert 0 < len(page.tickets) < len(ORDERED)


async def test_503_is_transient(api: str) -> None:
    source = client(api, ticket_path="/unavailable/{id}")
    try:
        with pytest.raises(TransientError, match="503") as caught:
            await source.get_ticket("T1001")
        assert caught.value.retry_after is None
    finally:
        await source.close()


async def test_429_is_transient_and_honours_retry_after(api: str) -> None:
    source = client(api, ticket_path="/busy/{id}")
    try:
        with pytest.raises(TransientError, match="429") as caught:
            await source.get_ticket("T1001")
        assert caught.value.retry_after == 7
    finally:
        await source.close()


async def test_a_read_timeout_is_transient(api: str) -> None:
    source = client(api, ticket_path="/slow/{id}", read_timeout=0.2)
    try:
        with pytest.raises(TransientError, match="timed out"):
            await source.get_ticket("T1001")
    finally:
        await source.close()


async def test_connection_refused_is_transient() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    source = client(f"http://127.0.0.1:{port}", connect_timeout=1.0)
    try:
        with pytest.raises(TransientError, match="unreachable"):
            await source.list_tickets()
    finally:
        await source.close()


async def test_wrong_auth_is_permanent_and_never_echoed(api: str) -> None:
    source = client(api, auth_value="Bearer wrong-token")
    try:
        with pytest.raises(PermanentError, match="401") as caught:
            await source.get_ticket("T1001")
        assert "wrong-token" not in str(caught.value)
        with pytest.raises(PermanentError, match="401"):
            await source.list_tickets()
    finally:
        await source.close()


async def test_malformed_answers_are_permanent(api: str) -> None:
    source = client(api, ticket_path="/garbage/{id}", items_key="issues")
    try:
        with pytest.raises(PermanentError, match="malformed ticket from"):
            await source.get_ticket("T1001")
        with pytest.raises(PermanentError, match="malformed ticket list"):
            await source.list_tickets()  # no "issues" key in the answer
    finally:
        await source.close()


class Scripted:
    """A stand-in helpdesk that answers every GET with `status` and `headers`."""

    def __init__(self) -> None:
        self.status = 503
        self.headers: dict[str, str] = {}
        app = Starlette(
            routes=[Route("/tickets", self.answer), Route("/tickets/{id}", self.answer)]
        )
        self.server = HttpServer(app, "127.0.0.1", 0)

    async def answer(self, request: Request) -> Response:
        return Response("scripted", status_code=self.status, headers=self.headers)


@pytest.fixture
async def scripted() -> AsyncIterator[Scripted]:
    made = Scripted()
    await made.server.start()
    try:
        yield made
    finally:
        await made.server.stop()


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (408, TransientError),
        (409, TransientError),
        (425, TransientError),
        (500, TransientError),
        (400, PermanentError),
        (403, PermanentError),
        (410, PermanentError),
        (422, PermanentError),
    ],
)
async def test_statuses_follow_the_shared_rule(
    scripted: Scripted, status: int, kind: type[Exception]
) -> None:
    scripted.status = status
    source = client(scripted.server.url)
    try:
        with pytest.raises(kind, match=f"source answered {status}"):
            await source.get_ticket("T1001")
        with pytest.raises(kind, match=f"source answered {status}"):
            await source.list_tickets()
    finally:
        await source.close()


async def test_a_retry_after_http_date_is_honoured(scripted: Scripted) -> None:
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=30)
    scripted.headers = {"Retry-After": email.utils.format_datetime(later, usegmt=True)}
    source = client(scripted.server.url)
    try:
        with pytest.raises(TransientError, match="503") as caught:
            await source.get_ticket("T1001")
    finally:
        await source.close()
    assert caught.value.retry_after is not None and 28 <= caught.value.retry_after <= 30


# -- the contract: shared/helpdesk/helpdesk.openapi.json ----------------------------------------

CONTRACT_URI = "urn:desk:helpdesk-contract"


@pytest.fixture(scope="module")
def contract() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(CONTRACT.read_text())
    return document


def validator(contract: dict[str, Any], schema: str) -> jsonschema.Draft202012Validator:
    """A JSON Schema 2020-12 validator (OpenAPI 3.1's dialect) for one of the contract's schemas,
    its `$ref`s resolved within the document, formats (date-time, email) checked."""
    registry: Registry[Any] = Registry().with_resource(
        CONTRACT_URI, Resource.from_contents(contract, default_specification=DRAFT202012)
    )
    return jsonschema.Draft202012Validator(
        {"$ref": f"{CONTRACT_URI}#/components/schemas/{schema}"},
        registry=registry,
        format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER,
    )


def conforms(contract: dict[str, Any], path: str, response: httpx.Response) -> None:
    """Assert `response` is an answer the contract allows for GET `path`: a documented status,
    the documented headers, and a JSON body matching the documented schema."""
    operation = contract["paths"][path]["get"]
    status = str(response.status_code)
    documented = operation["responses"]
    key = status if status in documented else f"{status[0]}XX"
    assert key in documented, f"GET {path} answered {status}, which the contract does not list"
    answer = documented[key]
    if "$ref" in answer:
        answer = contract["components"]["responses"][answer["$ref"].rsplit("/", 1)[1]]
    for name, header in answer.get("headers", {}).items():
        if header.get("required"):
            assert name in response.headers
    media = response.headers.get("content-type", "").split(";")[0].strip()
    content = answer.get("content", {})
    listed = media if media in content else "*/*"
    assert listed in content, f"{status} as {media!r} is not in the contract"
    schema = content[listed].get("schema", {})
    if "$ref" in schema:
        body = response.json() if media == "application/json" else response.text
        validator(contract, schema["$ref"].rsplit("/", 1)[1]).validate(body)


def test_the_contract_is_a_valid_openapi_3_1_document(contract: dict[str, Any]) -> None:
    openapi_spec_validator.validate(contract)
    assert contract["openapi"].startswith("3.1")
    broken = json.loads(json.dumps(contract))
    broken["paths"]["/tickets"]["get"]["responses"] = "none"
    with pytest.raises(openapi_spec_validator.validation.exceptions.OpenAPIValidationError):
        openapi_spec_validator.validate(broken)


@pytest.mark.parametrize("model", [Ticket, Customer, Message, TicketPage, Article])
def test_the_contract_lists_every_field_of_the_model(
    contract: dict[str, Any], model: type[BaseModel]
) -> None:
    schema = contract["components"]["schemas"][model.__name__]
    assert set(schema["properties"]) == set(model.model_fields)
    required = {name for name, field in model.model_fields.items() if field.is_required()}
    assert set(schema.get("required", [])) == required
    for name, field in model.model_fields.items():
        if typing.get_origin(field.annotation) is typing.Literal:
            assert schema["properties"][name]["enum"] == list(typing.get_args(field.annotation))


def test_the_contract_names_the_parameters_the_source_sends(contract: dict[str, Any]) -> None:
    defaults = {
        name: p.default for name, p in inspect.signature(HttpSource.__init__).parameters.items()
    }
    assert set(contract["paths"]) == {
        defaults["tickets_path"],
        defaults["ticket_path"],
        "/articles",  # read only when DESK_HELPDESK_ARTICLES_PATH names it (no default)
    }
    assert defaults["articles_path"] is None
    listed = {p["name"] for p in contract["paths"]["/tickets"]["get"]["parameters"]}
    assert listed == {
        defaults["updated_since_param"],
        defaults["cursor_param"],
        defaults["limit_param"],
    }
    page = contract["components"]["schemas"]["TicketPage"]["properties"]
    assert set(page) == {defaults["items_key"], defaults["next_key"]}
    assert contract["components"]["securitySchemes"]["apiKey"]["name"] == defaults["auth_header"]


def test_the_demo_tickets_conform(contract: dict[str, Any]) -> None:
    tickets = validator(contract, "Ticket")
    for ticket in TICKETS:
        tickets.validate(ticket.model_dump(mode="json"))
    assert sum(len(t.messages) > 1 for t in TICKETS) > 10


def test_the_contract_refuses_what_the_source_would_refuse(contract: dict[str, Any]) -> None:
    tickets = validator(contract, "Ticket")
    good = demo("T1008").model_dump(mode="json")
    bad_author = json.loads(json.dumps(good))
    bad_author["messages"][1]["author"] = "bot"
    no_status = {k: v for k, v in good.items() if k != "status"}
    bad_time = {**good, "updated_at": "yesterday"}
    for wrong in (bad_author, no_status, bad_time):
        assert not tickets.is_valid(wrong)
        with pytest.raises(ValueError):
            Ticket.model_validate(wrong)
    without = {k: v for k, v in good.items() if k != "messages"}
    assert tickets.is_valid(without) and len(Ticket.model_validate(without).messages) == 1


async def test_the_helpdesk_server_answers_as_the_contract_says(
    api: str, contract: dict[str, Any]
) -> None:
    auth = {"Authorization": TOKEN}
    async with httpx.AsyncClient(base_url=api, headers=auth) as http:
        cursor: str | None = None
        pages = 0
        while True:
            params = {"limit": "9", **({"cursor": cursor} if cursor else {})}
            answer = await http.get("/tickets", params=params)
            assert answer.status_code == 200
            conforms(contract, "/tickets", answer)
            pages += 1
            cursor = answer.json()["next_cursor"]
            if cursor is None:
                break
        assert pages == 5
        since = await http.get("/tickets", params={"updated_since": "2026-11-20T00:00:00+00:00"})
        conforms(contract, "/tickets", since)
        assert 0 < len(since.json()["tickets"]) < len(TICKETS)
        for ticket in TICKETS:
            answer = await http.get(f"/tickets/{ticket.id}")
            assert answer.status_code == 200
            conforms(contract, "/tickets/{id}", answer)
        for path, answer in [
            ("/tickets/{id}", await http.get("/tickets/T9999")),
            ("/tickets/{id}", await http.get("/tickets/T1001", headers={"Authorization": "x"})),
            ("/tickets", await http.get("/tickets", headers={"Authorization": "x"})),
            ("/tickets", await http.get("/tickets", params={"cursor": "not a cursor!"})),
            ("/tickets/{id}", await http.get("/busy/T1001")),  # stand-ins for the same call
            ("/tickets/{id}", await http.get("/unavailable/T1001")),
        ]:
            assert answer.status_code in (404, 401, 400, 429, 503)
            conforms(contract, path, answer)
        busy = await http.get("/busy/T1001")
        assert answers.retry_after(busy.headers) == 7
        garbage = await http.get("/garbage/T1001")  # the check can fail: HTML is no answer
        with pytest.raises(AssertionError):
            conforms(contract, "/tickets/{id}", garbage)


async def test_the_help_centre_articles_are_read_and_one_off_contract_is_skipped(
    api: str, contract: dict[str, Any]
) -> None:
    source = client(api, articles_path="/articles")
    try:
        [article] = await source.list_articles()
    finally:
        await source.close()
    assert (article.id, article.category) == ("kb-4711", "billing")
    assert "3 to 5 business days" in article.body
    validator(contract, "Article").validate(ARTICLES[0])
    assert not validator(contract, "Article").is_valid(ARTICLES[1])  # skipped: no title
    without = client(api)  # no articles path: none read
    try:
        assert await without.list_articles() == []
    finally:
        await without.close()
