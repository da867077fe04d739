"""How the Draft comes back (`DESK_LLM_OUTPUT`, `model`): what each mode asks the endpoint for,
and the answer read.

Whatever the mode, an answer is read the same way: the Draft tool call if there is one, else
one JSON object in the text (inside a ```json fence or text around it is tolerated).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, SystemMessage
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_function
from pydantic import BaseModel, ValidationError

from .prompt import JSON_ANSWER, Draft

DRAFT_TOOL = Draft.__name__

Output = Literal["auto", "tool", "json_schema", "json"]
Mode = Literal["tool", "json_schema", "json"]
MODES: tuple[Mode, ...] = ("tool", "json_schema", "json")  # auto's order

NOT_VALID = "the model's Draft did not validate"
NO_DRAFT = "the model did not return a Draft"


# ---- the request ------------------------------------------------------------------------------


def response_format(schema: type[BaseModel]) -> dict[str, Any]:
    """OpenAI's `json_schema` response format for `schema`: strict when every property is
    required (what strict mode demands; true of Draft), else non-strict. vLLM, llama.cpp's
    server and Ollama read `json_schema.schema` and accept (or ignore) `strict`."""
    function = convert_to_openai_function(schema)  # pydantic titles stripped, descriptions kept
    parameters: dict[str, Any] = function["parameters"]
    strict = set(parameters.get("required") or ()) == set(parameters.get("properties") or {})
    if strict:
        parameters = {**parameters, "additionalProperties": False}
    spec: dict[str, Any] = {"name": function["name"], "schema": parameters, "strict": strict}
    if function.get("description"):
        spec["description"] = function["description"]
    return {"type": "json_schema", "json_schema": spec}


DRAFT_FORMAT = response_format(Draft)


def bind(model: BaseChatModel, mode: Mode) -> Runnable[Any, BaseMessage]:
    if mode == "tool":
        return model.bind_tools([Draft], tool_choice=DRAFT_TOOL, parallel_tool_calls=False)
    if mode == "json_schema":
        return model.bind(response_format=DRAFT_FORMAT)
    return model


def with_json_instruction(prompt: list[BaseMessage]) -> list[BaseMessage]:
    """The prompt with the JSON answer format appended to its system message (one system
    message: some chat templates reject a second one)."""
    if prompt and isinstance(prompt[0], SystemMessage) and isinstance(prompt[0].content, str):
        return [SystemMessage(f"{prompt[0].content}\n\n{JSON_ANSWER}"), *prompt[1:]]
    return [SystemMessage(JSON_ANSWER), *prompt]


# ---- the answer -------------------------------------------------------------------------------

_FENCE = re.compile(r"```[a-zA-Z]*[ \t]*\n?(.*?)```", re.DOTALL)
_MAX_STARTS = 20  # "{" positions tried per candidate text: prose with braces stays cheap


def json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in `text`: inside a ``` fence, the whole text, or an object with
    text around it. A tool call written out as text ({"name": "Draft", "arguments": {...}})
    gives its arguments."""
    decoder = json.JSONDecoder()
    for candidate in [*(m.group(1) for m in _FENCE.finditer(text)), text]:
        start = candidate.find("{")
        for _ in range(_MAX_STARTS):
            if start < 0:
                break
            try:
                value, _end = decoder.raw_decode(candidate, start)
            except ValueError:
                start = candidate.find("{", start + 1)
                continue
            if isinstance(value, dict):
                return _unwrapped(value)
            start = candidate.find("{", start + 1)
    return None


def _unwrapped(value: dict[str, Any]) -> dict[str, Any]:
    if value.get("name") == DRAFT_TOOL:
        inner = value.get("arguments", value.get("parameters"))
        if isinstance(inner, str):
            try:
                inner = json.loads(inner)
            except ValueError:
                return value
        if isinstance(inner, dict):
            return inner
    return value


@dataclass(frozen=True)
class Read:
    draft: Draft | None
    problem: str | None
    ignored: bool  # the endpoint answered as if the mode's constraint was not there


def _validated(args: Any) -> tuple[Draft | None, str | None]:
    try:
        return Draft.model_validate(args), None
    except ValidationError:
        return None, NOT_VALID


def read(message: BaseMessage, mode: Mode) -> Read:
    """The Draft in the model's answer, or why there is none."""
    calls = getattr(message, "tool_calls", None) or []
    invalid = getattr(message, "invalid_tool_calls", None) or []
    for call in calls:
        if call.get("name") == DRAFT_TOOL:
            return Read(*_validated(call.get("args") or {}), ignored=False)
    for call in invalid:
        if call.get("name") == DRAFT_TOOL:  # arguments that are not even JSON
            return Read(None, NOT_VALID, ignored=False)
    if calls or invalid:
        return Read(None, NO_DRAFT, ignored=False)  # some other tool: the model's own mistake
    if message.additional_kwargs.get("refusal"):
        return Read(None, NO_DRAFT, ignored=False)  # the model declined this ticket
    found = json_object(message.text)
    if found is None:
        # prose: a forced tool call or a schema-constrained answer cannot be prose
        return Read(None, NO_DRAFT, ignored=mode != "json")
    # JSON as text: expected in json_schema and json mode; in tool mode, tool_choice was ignored
    return Read(*_validated(found), ignored=mode == "tool")


def token_counts(message: Any) -> tuple[int, int]:
    """The tokens the answer says it took: in, out."""
    usage = getattr(message, "usage_metadata", None) or {}
    return int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))
