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


# model -> its Draft-shaped runnable: building one turns the schema into a tool each time, which
# costs more than the offline model's whole answer. Few models live in a process; keep them.
_STRUCTURED: dict[int, tuple[BaseChatModel, Runnable[Any, Any]]] = {}


def _structured(model: BaseChatModel) -> Runnable[Any, Any]:
    found = _STRUCTURED.get(id(model))
    if found is None or found[0] is not model:
        runnable = model.with_structured_output(Draft, method="function_calling", include_raw=True)
        found = _STRUCTURED[id(model)] = (model, runnable)
    return found[1]


async def ask(model: BaseChatModel, prompt: list[BaseMessage]) -> ModelAnswer:
    structured = _structured(model)
    try:
        result: Any = await structured.ainvoke(prompt)
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
    except ValidationError:
        return ModelAnswer(None, 0, 0, "the model's answer did not match the Draft schema")
    raw = result.get("raw")
    usage = getattr(raw, "usage_metadata", None) or {}
    draft = result.get("parsed")
    problem = None
    if not isinstance(draft, Draft):
        draft = None
        problem = "the model did not return a Draft"
        if result.get("parsing_error") is not None:
            problem = "the model's Draft did not validate"
    return ModelAnswer(
        draft, int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0)), problem
    )
