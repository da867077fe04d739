"""What the drafter makes of the model's answer: a Draft, or the reason there is none."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI

from services.drafter.model import ask
from services.drafter.offline import OfflineDraftModel
from tests.fakellm import FakeLLM

PROMPT = [SystemMessage("Draft a reply."), HumanMessage("Where is my refund?\n- be kind")]


def client(fake: FakeLLM) -> ChatOpenAI:
    return ChatOpenAI(base_url=fake.url, api_key="k", model="m", max_retries=0)  # type: ignore[arg-type]


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
