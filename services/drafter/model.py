"""The chat model: an OpenAI-compatible endpoint through langchain-openai, or the offline one.

How the Draft comes back is `DESK_LLM_OUTPUT`:

- `tool`: a forced call of the Draft tool (`tools` + a named `tool_choice`);
- `json_schema`: `response_format` with the Draft's JSON schema; the answer is the content;
- `json`: nothing special is sent; the system message asks for one JSON object as plain text;
- `auto` (default): tool first. When the endpoint refuses it (a 400/404/422/501 naming the
  feature, or a 500 saying it does not support it, as llama.cpp's server does) or ignores it
  (answers text where the forced call or the schema was asked), json_schema, then json. The
  mode that works is remembered per model, so later calls go straight to it; the choice is
  logged once. A refusal never counts when it is a 429, a 502/503/504 or a timeout.

Whatever the mode, an answer is read the same way (`output`).

Client retries are off (retrying is the bus's job); foreign errors are mapped once, as the call
meets them (an error answer: `failures`).
What is an outage of the endpoint — no connection, a timeout, 408/409/425/5xx, a 429 (the
drafter's `Limiter` halves its calls in flight and waits out the Retry-After), refused
credentials or path (401/402/403/404/405), an explicit `DESK_LLM_OUTPUT` mode refused — is an
`EndpointFailure`, which the drafter's `Health` (its breaker) turns into waiting; a refusal of
this prompt's content (400, 413, 422) is `ModelFailed`: a person writes that ticket's reply.
Without a `Health` (`desk eval`, `desk shadow`) an outage is a `TransientError` (a 429:
`Unavailable`; refused credentials: `PermanentError`).

After a mode was left, auto asks the stronger modes again once the endpoint came back from an
outage, or after `RETRY_MODES_AFTER` seconds: a spell of bad answers does not decide for good.
"""

from __future__ import annotations

import logging
import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import openai
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable
from langchain_openai import ChatOpenAI

from shared.settings import DrafterSettings

from .failures import Refused, mapped, refuses, without_health
from .health import RETRY_MODES_AFTER, EndpointFailure, Health, ModelFailed
from .limiter import Call, Limiter
from .offline import OfflineDraftModel
from .output import (
    MODES,
    NO_DRAFT,
    NOT_VALID,
    Mode,
    Output,
    bind,
    read,
    token_counts,
    with_json_instruction,
)
from .output import json_object as json_object  # re-exported: where tests import it from
from .prompt import Draft

log = logging.getLogger(__name__)

_WHAT: dict[Mode, str] = {
    "tool": "a forced tool call (tools, tool_choice)",
    "json_schema": "a JSON-schema response format (response_format)",
    "json": "JSON in plain text",
}


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
        # aiohttp under the SDK's httpx interface (its `aiohttp` extra): about a third less
        # CPU per call than httpx's own transport with 64 calls in flight, on the one event
        # loop that also prepares and stores every draft (README, "How many model calls at
        # once"); timeouts, proxies from the environment and errors are the SDK's as before
        http_async_client=openai.DefaultAioHttpClient(
            event_hooks={"request": [_sending], "response": [_answered]}
        ),
    )


def announce(model: BaseChatModel, settings: DrafterSettings) -> None:
    """Say at start what drafts are written with."""
    if isinstance(model, OfflineDraftModel):
        log.info("no LLM endpoint configured: drafting with the built-in offline model")
    else:
        log.info(
            "drafting with %s at %s (DESK_LLM_OUTPUT=%s)",
            settings.llm_model,
            settings.llm_base_url,
            settings.llm_output,
        )


async def close_model(model: BaseChatModel) -> None:
    """Close the model's connections (the aiohttp session is the running loop's)."""
    client = getattr(model, "root_async_client", None)
    if isinstance(client, openai.AsyncOpenAI):
        await client.close()


def output_for(model: BaseChatModel, settings: DrafterSettings) -> Output:
    """The offline model answers with the tool call whatever it is asked: no probing."""
    return "tool" if isinstance(model, OfflineDraftModel) else settings.llm_output


@dataclass(frozen=True)
class ModelAnswer:
    draft: Draft | None  # None: the model answered without a usable Draft
    input_tokens: int
    output_tokens: int
    problem: str | None = None


@dataclass
class _Endpoint:
    """One model: its runnable per mode, and what auto learned about the endpoint.

    Built once per model: turning the schema into a tool costs more than the offline model's
    whole answer. `with_structured_output` would wrap it in a parser map with fallbacks that
    re-derive the schema on every call (a quarter of the graph's CPU per event, measured);
    reading the answer ourselves (`output.read`) gives the same outcomes."""

    model: BaseChatModel  # held, so its id() is not reused while the entry lives
    mode: Mode = "tool"  # auto: the mode asked first now (moves down MODES; see `renew`)
    confirmed: Mode | None = None  # auto: the mode last logged as chosen
    left: list[str] = field(default_factory=list)  # auto: why earlier modes were left
    bound: dict[Mode, Runnable[Any, BaseMessage]] = field(default_factory=dict)
    # its HTTP client takes and gives back a call's slot itself (`make_model`'s hooks)
    hooked: bool = False
    left_at: float = 0.0  # auto: when a mode was last left (monotonic)
    recoveries: int = 0  # auto: the endpoint's recoveries from outages when it was left

    def renew(self, health: Health | None) -> None:
        """Auto: ask the strongest mode again once the endpoint has come back from an outage
        since a mode was left, or after `RETRY_MODES_AFTER` seconds."""
        if self.mode == MODES[0]:
            return
        # a call while the model counts as down is a probe: it asks what a restarted endpoint
        # should be asked
        came_back = health is not None and (not health.up or health.recoveries != self.recoveries)
        if not came_back and time.monotonic() - self.left_at < RETRY_MODES_AFTER:
            return
        log.info("model endpoint: DESK_LLM_OUTPUT=auto asks for %s again", MODES[0])
        self.mode, self.confirmed, self.left = MODES[0], None, []

    def runnable(self, mode: Mode) -> Runnable[Any, BaseMessage]:
        found = self.bound.get(mode)
        if found is None:
            found = self.bound[mode] = bind(self.model, mode)
        return found

    def leave(self, mode: Mode, why: str) -> None:
        """Auto: `mode` does not work here; the next one is asked from now on."""
        if self.mode != mode or mode == MODES[-1]:
            return  # a concurrent call moved on already
        self.mode = MODES[MODES.index(mode) + 1]
        self.left.append(f"{mode} {why}")
        self.left_at = time.monotonic()
        log.debug("model endpoint: %s %s; trying %s", mode, why, self.mode)

    def confirm(self, mode: Mode) -> None:
        if mode != self.mode or mode == self.confirmed:
            return
        self.confirmed = mode
        name = getattr(self.model, "model_name", type(self.model).__name__)
        after = f" after {'; '.join(self.left)}" if self.left else ""
        log.info("model endpoint: DESK_LLM_OUTPUT=auto chose %s for %s%s", mode, name, after)


_ENDPOINTS: dict[int, _Endpoint] = {}


def _endpoint(model: BaseChatModel) -> _Endpoint:
    found = _ENDPOINTS.get(id(model))
    if found is None or found.model is not model:
        hooks = getattr(getattr(model, "http_async_client", None), "event_hooks", None) or {}
        hooked = _sending in hooks.get("request", ())
        found = _ENDPOINTS[id(model)] = _Endpoint(model, hooked=hooked)
    return found


def learned_mode(model: BaseChatModel) -> Mode:
    """The mode auto asks `model` in now (tool until the endpoint refused or ignored it)."""
    return _endpoint(model).mode


_CALL: ContextVar[Call | None] = ContextVar("desk_model_call", default=None)


async def _sending(request: Any) -> None:
    """The HTTP client's request hook: the request is built; it goes out once it has a slot."""
    call = _CALL.get()
    if call is not None:
        await call.take()


async def _answered(response: Any) -> None:
    """The HTTP client's response hook: the endpoint answered; its slot is free again."""
    call = _CALL.get()
    if call is not None:
        await call.give_back()


async def _call(
    endpoint: _Endpoint, mode: Mode, prompt: list[BaseMessage], limiter: Limiter | None = None
) -> tuple[ModelAnswer, bool]:
    """One request in `mode`: the answer, and whether the endpoint ignored the mode."""
    if limiter is None:
        return await _request(endpoint, mode, prompt)
    call = Call(limiter)
    token = _CALL.set(call)  # the HTTP hooks take and give back its slot (`Call`)
    try:
        if not endpoint.hooked:  # another client: the slot spans the whole call
            await call.take()
        found = await _request(endpoint, mode, prompt)
    except EndpointFailure as failure:
        if failure.kind == "overloaded":  # a 429: fewer calls at once, none before Retry-After
            limiter.overloaded(failure.retry_after)
        raise
    finally:
        _CALL.reset(token)
        await call.give_back()  # no answer came (a refused connection, a timeout)
    limiter.answered()
    return found


async def _request(
    endpoint: _Endpoint, mode: Mode, prompt: list[BaseMessage]
) -> tuple[ModelAnswer, bool]:
    asked = with_json_instruction(prompt) if mode == "json" else prompt
    try:
        message = await endpoint.runnable(mode).ainvoke(asked)
    except openai.LengthFinishReasonError as exc:  # json_schema: cut off at the token limit
        usage = exc.completion.usage
        tokens = (usage.prompt_tokens, usage.completion_tokens) if usage else (0, 0)
        return ModelAnswer(None, *tokens, NOT_VALID), False
    except openai.ContentFilterFinishReasonError:
        return ModelAnswer(None, 0, 0, NO_DRAFT), False
    except openai.APIStatusError as exc:
        if refuses(exc, mode):
            raise Refused(exc.status_code) from None
        raise mapped(exc) from None
    except openai.APITimeoutError:  # before APIConnectionError: it is one
        raise EndpointFailure("model unreachable (no answer in time)", kind="timeout") from None
    except openai.APIConnectionError as exc:
        raise EndpointFailure(
            f"model unreachable ({exc.__class__.__name__})", kind="unreachable"
        ) from None
    found = read(message, mode)
    return ModelAnswer(found.draft, *token_counts(message), found.problem), found.ignored


async def ask(
    model: BaseChatModel,
    prompt: list[BaseMessage],
    output: Output = "auto",
    limiter: Limiter | None = None,
    health: Health | None = None,
) -> ModelAnswer:
    """The model's answer to `prompt`. With `health`, the call waits while the model is down
    (`Unavailable`) and its outcome is the breaker's."""
    if health is None:
        try:
            return await _ask(model, prompt, output, limiter, None)
        except EndpointFailure as failure:
            raise without_health(failure) from None
    health.admit()
    try:
        answer = await _ask(model, prompt, output, limiter, health)
    except EndpointFailure as failure:
        raise health.failed(failure) from None
    except ModelFailed:  # it answered: this prompt is what it refused
        health.answered()
        raise
    except BaseException:  # not the endpoint's doing (cancelled, a bug)
        health.release()
        raise
    health.answered()
    return answer


async def _ask(
    model: BaseChatModel,
    prompt: list[BaseMessage],
    output: Output,
    limiter: Limiter | None,
    health: Health | None,
) -> ModelAnswer:
    endpoint = _endpoint(model)
    if output != "auto":
        try:
            answer, _ignored = await _call(endpoint, output, prompt, limiter)
        except Refused as refused:
            others = ", ".join(m for m in ("auto", *MODES) if m != output)
            raise EndpointFailure(
                f"the model endpoint refused {_WHAT[output]} with HTTP {refused.status}, "
                f"which DESK_LLM_OUTPUT={output} asks for: set DESK_LLM_OUTPUT to one of {others}",
                kind="refused",
            ) from None
        return answer
    endpoint.renew(health)
    while True:  # at most one request per mode: every refusal moves the endpoint on
        mode = endpoint.mode
        try:
            answer, ignored = await _call(endpoint, mode, prompt, limiter)
        except Refused as refused:
            endpoint.leave(mode, f"refused ({refused.status})")
            if health is not None:
                endpoint.recoveries = health.recoveries
            continue
        if ignored:
            endpoint.leave(mode, "ignored")
            if health is not None:
                endpoint.recoveries = health.recoveries
        elif answer.draft is not None:
            endpoint.confirm(mode)
        return answer
