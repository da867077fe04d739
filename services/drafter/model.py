"""The chat model: an OpenAI-compatible endpoint through langchain-openai, or the offline one.

Client retries are off (retrying is the bus's job); foreign errors are mapped here, once:
429/5xx/timeouts/connection errors → `TransientError` (honouring Retry-After); 401/403 and
other refusals → `PermanentError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import openai
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable
from langchain_openai import ChatOpenAI
from pydantic import ValidationError

from shared.errors import PermanentError, TransientError
from shared.settings import DrafterSettings

from .offline import OfflineDraftModel
from .prompt import Draft

DRAFT_TOOL = Draft.__name__


def make_model(settings: DrafterSettings) -> BaseChatModel:
    if not settings.llm_base_url:
        return OfflineDraftModel()
    return ChatOpenAI(
        base_url=settings.llm_base_url,
        api_key=settings.llm_api_key or "not-needed",  # type: ignore[arg-type]
        model=settings.llm_model,
        timeout=settings.llm_timeout,
        temperature=0,
        max_retries=0,
    )


@dataclass(frozen=True)
class ModelAnswer:
    draft: Draft | None  # None: the model answered without a usable Draft
    input_tokens: int
    output_tokens: int
    problem: str | None = None


def _retry_after(exc: openai.APIStatusError) -> float | None:
    value = exc.response.headers.get("retry-after") if exc.response is not None else None
    try:
        return float(value) if value else None
    except ValueError:
        return None


# model -> the model with the Draft tool bound, forced. Built once per model: turning the schema
# into a tool costs more than the offline model's whole answer. `with_structured_output` would
# wrap it in a parser map with fallbacks that re-derive the schema on every call (a quarter of
# the graph's CPU per event, measured); reading the tool call here gives the same three outcomes.
_BOUND: dict[int, tuple[BaseChatModel, Runnable[Any, BaseMessage]]] = {}


def _with_draft_tool(model: BaseChatModel) -> Runnable[Any, BaseMessage]:
    found = _BOUND.get(id(model))
    if found is None or found[0] is not model:
        bound = model.bind_tools([Draft], tool_choice=DRAFT_TOOL, parallel_tool_calls=False)
        found = _BOUND[id(model)] = (model, bound)
    return found[1]


def _read_draft(message: BaseMessage) -> tuple[Draft | None, str | None]:
    """The Draft in the model's tool call, or why there is none."""
    for call in getattr(message, "tool_calls", None) or []:
        if call.get("name") == DRAFT_TOOL:
            try:
                return Draft.model_validate(call.get("args") or {}), None
            except ValidationError:
                return None, "the model's Draft did not validate"
    for call in getattr(message, "invalid_tool_calls", None) or []:
        if call.get("name") == DRAFT_TOOL:  # arguments that are not even JSON
            return None, "the model's Draft did not validate"
    return None, "the model did not return a Draft"


async def ask(model: BaseChatModel, prompt: list[BaseMessage]) -> ModelAnswer:
    try:
        message = await _with_draft_tool(model).ainvoke(prompt)
    except openai.RateLimitError as exc:
        raise TransientError("model rate-limited (429)", retry_after=_retry_after(exc)) from None
    except (openai.APITimeoutError, openai.APIConnectionError) as exc:
        raise TransientError(f"model unreachable ({exc.__class__.__name__})") from None
    except openai.InternalServerError as exc:
        raise TransientError(
            f"model endpoint answered {exc.status_code}", retry_after=_retry_after(exc)
        ) from None
    except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
        raise PermanentError(
            f"model endpoint refused our credentials ({exc.status_code})"
        ) from None
    except openai.APIStatusError as exc:
        if exc.status_code in (408, 409) or exc.status_code >= 500:
            raise TransientError(f"model endpoint answered {exc.status_code}") from None
        raise PermanentError(f"model endpoint refused the request ({exc.status_code})") from None
    usage = getattr(message, "usage_metadata", None) or {}
    draft, problem = _read_draft(message)
    return ModelAnswer(
        draft, int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0)), problem
    )
