"""What the drafter makes of the model's answer: a Draft, or the reason there is none."""

from __future__ import annotations

import datetime as dt
import email.utils
import json
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any, Literal

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from desk.process import free_port
from services.drafter.model import ask, close_model, json_object, learned_mode, make_model
from services.drafter.offline import OfflineDraftModel
from services.drafter.prompt import JSON_ANSWER, Draft
from shared.errors import PermanentError, TransientError
from shared.http import HttpServer
from shared.inbox import CATEGORIES
from shared.settings import DrafterSettings
from standins.llm import FakeLLM, FormatSupport, error_body

PROMPT = [SystemMessage("Draft a reply."), HumanMessage("Where is my refund?\n- be kind")]


_made: list[BaseChatModel] = []


def client(fake: FakeLLM | str, **settings: Any) -> BaseChatModel:
    """The drafter's own model client (`make_model`: aiohttp under the SDK) for `fake`."""
    url = fake if isinstance(fake, str) else fake.url
    model = make_model(
        DrafterSettings(llm_base_url=url, llm_api_key="k", llm_model="m", **settings)
    )
    _made.append(model)
    return model


@pytest.fixture(autouse=True)
async def _closed() -> AsyncIterator[None]:
    yield
    while _made:
        await close_model(_made.pop())


async def test_a_forced_draft_tool_call_becomes_a_draft_with_its_token_counts(
    fake_llm: FakeLLM,
) -> None:
    answer = await ask(client(fake_llm), PROMPT)
    assert answer.draft is not None and answer.problem is None
    assert "- be kind" in answer.draft.reply  # the fake quotes feedback lines verbatim
    assert answer.input_tokens > 0 and answer.output_tokens > 0
    [request] = fake_llm.requests
    assert request["tool_choice"]["function"]["name"] == "Draft"
    assert request["parallel_tool_calls"] is False
    assert [t["function"]["name"] for t in request["tools"]] == ["Draft"]


async def test_a_plain_text_answer_is_no_draft(fake_llm: FakeLLM) -> None:
    fake_llm.answer_text_next("Sure, here is a reply.")
    answer = await ask(client(fake_llm), PROMPT)
    assert answer.draft is None
    assert answer.problem == "the model did not return a Draft"


async def test_tool_arguments_that_break_the_schema_are_no_draft(fake_llm: FakeLLM) -> None:
    def missing_reply(body: dict[str, Any]) -> dict[str, Any]:
        return {"category": "refund", "summary": "Refund"}

    fake_llm.responder = missing_reply
    answer = await ask(client(fake_llm), PROMPT)
    assert answer.draft is None
    assert answer.problem == "the model's Draft did not validate"


async def test_the_offline_model_answers_the_same_way_without_a_network() -> None:
    model = OfflineDraftModel()
    first = await ask(model, PROMPT)
    again = await ask(model, PROMPT)
    assert first.draft is not None and first.problem is None
    assert first == again  # deterministic


# ---- how the Draft comes back: DESK_LLM_OUTPUT ------------------------------------------------


def draft_fields(body: dict[str, Any]) -> dict[str, Any]:
    return {"category": "bug", "summary": "Export fails", "reply": "Hi,\n\nThe Support Team"}


def missing_reply(body: dict[str, Any]) -> dict[str, Any]:
    return {"category": "refund", "summary": "Refund"}


@pytest.fixture
def tools_refused() -> Iterator[FakeLLM]:
    """A server that refuses tools (400) and honours a JSON-schema response format."""
    with FakeLLM(tools="refuse") as fake:
        yield fake


@pytest.fixture
def text_only() -> Iterator[FakeLLM]:
    """A server that refuses tools and response_format; the model writes JSON when asked."""
    with FakeLLM(tools="refuse", response_format="refuse", text="fenced") as fake:
        yield fake


def sent(request: dict[str, Any]) -> str:
    """Which mode a recorded request was asked in."""
    if "tools" in request or "tool_choice" in request:
        return "tool"
    if "response_format" in request:
        return "json_schema"
    return "json"


async def test_explicit_tool_mode_sends_the_forced_draft_tool(fake_llm: FakeLLM) -> None:
    answer = await ask(client(fake_llm), PROMPT, "tool")
    assert answer.draft is not None and answer.problem is None
    [request] = fake_llm.requests
    assert request["tool_choice"] == {"type": "function", "function": {"name": "Draft"}}
    assert "response_format" not in request


async def test_json_schema_mode_sends_the_draft_schema_and_reads_the_content(
    tools_refused: FakeLLM,
) -> None:
    answer = await ask(client(tools_refused), PROMPT, "json_schema")
    assert answer.draft is not None and answer.problem is None
    assert "- be kind" in answer.draft.reply
    assert answer.input_tokens > 0 and answer.output_tokens > 0
    [request] = tools_refused.requests
    assert request["answer"] == "json_schema" and "tools" not in request
    spec = request["response_format"]["json_schema"]
    assert request["response_format"]["type"] == "json_schema"
    assert (spec["name"], spec["strict"]) == ("Draft", True)
    assert spec["schema"]["required"] == ["category", "summary", "reply", "sources"]
    assert spec["schema"]["additionalProperties"] is False
    assert spec["schema"]["properties"]["category"]["enum"] == list(CATEGORIES)
    assert spec["description"] == Draft.__doc__
    assert request["messages"][0]["content"] == "Draft a reply."  # no JSON instruction


@pytest.mark.parametrize("style", ["json", "fenced"])
async def test_json_mode_asks_for_json_in_the_system_message_and_reads_the_text(
    style: Literal["json", "fenced"],
) -> None:
    with FakeLLM(tools="refuse", response_format="refuse", text=style) as fake:
        fake.responder = draft_fields
        answer = await ask(client(fake), PROMPT, "json")
        [request] = fake.requests
    assert answer.draft == Draft.model_validate(draft_fields({}))
    assert answer.problem is None and answer.output_tokens > 0
    assert sent(request) == "json"
    system, user = request["messages"]
    assert system["role"] == "system"  # one system message: the instruction is appended to it
    assert system["content"] == f"Draft a reply.\n\n{JSON_ANSWER}"
    assert '"category": one of "refund"' in system["content"]
    assert user["content"] == PROMPT[1].content


async def test_auto_falls_back_from_refused_tools_to_json_schema_and_stays_there(
    tools_refused: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="services.drafter.model")
    model = client(tools_refused)
    first = await ask(model, PROMPT)
    assert first.draft is not None and first.problem is None
    assert [(sent(r), r["answer"]) for r in tools_refused.requests] == [
        ("tool", "error 400"),
        ("json_schema", "json_schema"),
    ]
    second = await ask(model, PROMPT)  # the next ticket goes straight to what worked
    assert second.draft is not None
    assert [sent(r) for r in tools_refused.requests] == ["tool", "json_schema", "json_schema"]
    assert learned_mode(model) == "json_schema"
    chosen = [r.getMessage() for r in caplog.records if "chose" in r.getMessage()]
    assert len(chosen) == 1  # logged once
    assert "DESK_LLM_OUTPUT=auto chose json_schema" in chosen[0]
    assert "tool refused (400)" in chosen[0]


async def test_auto_falls_back_to_json_in_text_when_both_are_refused(text_only: FakeLLM) -> None:
    model = client(text_only)
    first = await ask(model, PROMPT)
    assert first.draft is not None and first.problem is None
    assert [(sent(r), r["answer"]) for r in text_only.requests] == [
        ("tool", "error 400"),
        ("json_schema", "error 400"),
        ("json", "text"),
    ]
    await ask(model, PROMPT)
    assert [sent(r) for r in text_only.requests][3:] == ["json"]
    assert learned_mode(model) == "json"


async def test_auto_reads_llama_cpps_500_for_tools_as_a_refusal() -> None:
    message = "tools param requires --jinja flag"
    with FakeLLM(tools="refuse", refusal_status=500, refusal_message=message) as fake:
        answer = await ask(client(fake), PROMPT)
        assert answer.draft is not None
        assert [sent(r) for r in fake.requests] == ["tool", "json_schema"]


async def test_auto_uses_json_text_from_a_server_that_ignores_tool_choice() -> None:
    with FakeLLM(tools="ignore", text="fenced") as fake:
        fake.responder = draft_fields
        model = client(fake)
        first = await ask(model, PROMPT)
        assert first.draft == Draft.model_validate(draft_fields({}))
        assert first.problem is None
        # tool_choice is not honoured here: the next call asks for the schema instead
        assert learned_mode(model) == "json_schema"
        second = await ask(model, PROMPT)
        assert second.draft is not None
        assert [(sent(r), r["answer"]) for r in fake.requests] == [
            ("tool", "text"),
            ("json_schema", "json_schema"),
        ]


async def test_auto_moves_on_when_a_server_answers_prose_to_the_forced_tool() -> None:
    with FakeLLM(tools="ignore") as fake:
        model = client(fake)
        first = await ask(model, PROMPT)
        assert first.draft is None and first.problem == "the model did not return a Draft"
        second = await ask(model, PROMPT)  # the redraft
        assert second.draft is not None
        assert [sent(r) for r in fake.requests] == ["tool", "json_schema"]


async def test_auto_moves_to_json_when_the_schema_is_ignored_too() -> None:
    with FakeLLM(tools="refuse", response_format="ignore") as fake:
        model = client(fake)
        first = await ask(model, PROMPT)  # prose where the schema was asked
        assert first.problem == "the model did not return a Draft"
        assert learned_mode(model) == "json"
        fake.text = "json"  # a model that follows the JSON instruction
        second = await ask(model, PROMPT)
        assert second.draft is not None
        assert [sent(r) for r in fake.requests] == ["tool", "json_schema", "json"]


async def test_an_explicit_tool_mode_refused_is_permanent_and_names_the_setting(
    tools_refused: FakeLLM,
) -> None:
    with pytest.raises(PermanentError) as raised:
        await ask(client(tools_refused), PROMPT, "tool")
    assert "DESK_LLM_OUTPUT=tool" in str(raised.value)
    assert "tool_choice" in str(raised.value) and "HTTP 400" in str(raised.value)
    assert len(tools_refused.requests) == 1  # no fallback in an explicit mode


async def test_an_explicit_json_schema_mode_refused_is_permanent_and_names_the_setting(
    text_only: FakeLLM,
) -> None:
    with pytest.raises(PermanentError, match="DESK_LLM_OUTPUT=json_schema"):
        await ask(client(text_only), PROMPT, "json_schema")
    assert len(text_only.requests) == 1


@pytest.mark.parametrize(
    ("status", "message", "retry_after"),
    [
        (429, None, 7.0),
        (503, "tool calls are overloaded", None),
        (502, None, None),
        (408, None, None),  # shared.answers: 408, 409 and 425 say "not now" too
        (409, "another request holds the lock", 3.0),
        (425, None, 2.5),
    ],
)
async def test_rate_limits_and_5xx_in_auto_stay_transient_and_keep_the_mode(
    fake_llm: FakeLLM, status: int, message: str | None, retry_after: float | None
) -> None:
    fake_llm.fail_next(status, retry_after=retry_after, message=message)
    model = client(fake_llm)
    with pytest.raises(TransientError) as raised:
        await ask(model, PROMPT)
    assert raised.value.retry_after == retry_after
    assert learned_mode(model) == "tool"
    answer = await ask(model, PROMPT)  # the retry asks for the tool again
    assert answer.draft is not None
    assert [sent(r) for r in fake_llm.requests] == ["tool", "tool"]


async def test_a_400_that_is_not_about_tools_is_permanent_without_a_fallback(
    fake_llm: FakeLLM,
) -> None:
    fake_llm.fail_next(400, message="This model's maximum context length is 8192 tokens.")
    model = client(fake_llm)
    with pytest.raises(PermanentError, match=r"refused the request \(400\)"):
        await ask(model, PROMPT)
    assert len(fake_llm.requests) == 1 and learned_mode(model) == "tool"


@pytest.mark.parametrize(
    ("status", "text"),
    [
        (401, r"refused our credentials \(401\)"),
        (403, r"refused our credentials \(403\)"),
        (410, r"refused the request \(410\)"),
        (422, r"refused the request \(422\)"),
    ],
)
async def test_other_4xx_are_permanent_even_with_a_retry_after(
    fake_llm: FakeLLM, status: int, text: str
) -> None:
    fake_llm.fail_next(status, retry_after=5.0, message="nothing to do with the mode")
    model = client(fake_llm)
    with pytest.raises(PermanentError, match=text):
        await ask(model, PROMPT)
    assert len(fake_llm.requests) == 1 and learned_mode(model) == "tool"


async def test_a_retry_after_http_date_is_honoured() -> None:
    """An endpoint that says when to come back as a date (RFC 9110) rather than in seconds."""
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=40)
    headers = {"Retry-After": email.utils.format_datetime(later, usegmt=True)}

    async def overloaded(request: Request) -> Response:
        return JSONResponse(error_body(503, "overloaded"), 503, headers=headers)

    app = Starlette(routes=[Route("/chat/completions", overloaded, methods=["POST"])])
    server = HttpServer(app, "127.0.0.1", 0)
    await server.start()
    try:
        model = client(server.url)
        with pytest.raises(TransientError, match="answered 503") as raised:
            await ask(model, PROMPT)
    finally:
        await server.stop()
    assert raised.value.retry_after is not None and 20 <= raised.value.retry_after <= 40
    assert learned_mode(model) == "tool"


async def test_a_model_slower_than_its_timeout_is_transient(fake_llm: FakeLLM) -> None:
    """DESK_LLM_TIMEOUT bounds a call: past it the delivery is retried later, not failed."""
    fake_llm.hang_next(3.0)
    with pytest.raises(TransientError, match="model unreachable"):
        await ask(client(fake_llm, llm_timeout=0.5), PROMPT)
    answer = await ask(client(fake_llm, llm_timeout=5.0), PROMPT)  # and the next one answers
    assert answer.draft is not None


async def test_an_endpoint_nobody_listens_on_is_transient() -> None:
    with pytest.raises(TransientError, match="model unreachable"):
        await ask(client(f"http://127.0.0.1:{free_port()}/v1"), PROMPT)


@pytest.mark.parametrize("output", ["json_schema", "json"])
async def test_json_that_breaks_the_schema_is_no_draft(
    output: Literal["json_schema", "json"],
) -> None:
    refuse_format: FormatSupport = "refuse" if output == "json" else "honor"
    with FakeLLM(tools="refuse", response_format=refuse_format, text="json") as fake:
        fake.responder = missing_reply
        answer = await ask(client(fake), PROMPT, output)
        assert [r["answer"] for r in fake.requests] == [
            "json_schema" if output == "json_schema" else "text"
        ]
    assert answer.draft is None
    assert answer.problem == "the model's Draft did not validate"


@pytest.mark.parametrize("text", ["{not json", "Sure! Here is a reply: thanks for writing."])
async def test_text_that_is_not_a_json_object_is_no_draft(text_only: FakeLLM, text: str) -> None:
    text_only.answer_text_next(text)
    answer = await ask(client(text_only), PROMPT, "json")
    assert answer.draft is None
    assert answer.problem == "the model did not return a Draft"


@pytest.mark.parametrize("output", ["auto", "tool", "json_schema", "json"])
async def test_the_offline_model_answers_in_every_mode(
    output: Literal["auto", "tool", "json_schema", "json"],
) -> None:
    answer = await ask(OfflineDraftModel(), PROMPT, output)
    assert answer.draft is not None and answer.problem is None


DRAFT = {"category": "bug", "summary": "s", "reply": "r {with braces}"}


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(DRAFT),
        f"```json\n{json.dumps(DRAFT, indent=2)}\n```",
        f"Sure {{!}} Here it is:\n```\n{json.dumps(DRAFT)}\n```\nCheers",
        f"Here you go: {json.dumps(DRAFT)} -- hope it helps",
        json.dumps({"name": "Draft", "arguments": json.dumps(DRAFT)}),
        json.dumps({"name": "Draft", "parameters": DRAFT}),
    ],
)
def test_json_object_finds_the_draft_in_text(text: str) -> None:
    assert json_object(text) == DRAFT


@pytest.mark.parametrize("text", ["", "no json here", "{broken", "[1, 2]", "{a} {b}"])
def test_json_object_finds_nothing_in_text_without_an_object(text: str) -> None:
    assert json_object(text) is None
