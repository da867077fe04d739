"""A real HTTP server speaking the OpenAI chat-completions protocol, for the test suite and
the fault suite.

The product's model client (`langchain_openai.ChatOpenAI`, i.e. the `openai` SDK) runs its real
code path against it: nothing is patched. Starlette on uvicorn, bound to 127.0.0.1 on a free
port, served from a background thread with its own event loop (`standins.server`), so it
answers in-process async tests and code under test running in another process alike.

    fake = FakeLLM().start()
    llm = ChatOpenAI(base_url=fake.url, api_key="test-key", model="m", max_retries=0)
    ...
    fake.stop()

or `with FakeLLM() as fake: ...`, or the test suite's `fake_llm` fixture (tests/conftest.py;
function scope: started, stopped after the test).

What it answers to `POST /v1/chat/completions`:

- By default a tool call to the function named in `tool_choice.function.name` (else the first
  tool), with arguments from `responder(body)` (replaceable). The default responder answers a
  tool named "Draft" with {"category": "refund" (or the first enum value), "summary", "reply"};
  the reply quotes verbatim every line of the last user message that starts with "- " (reviewer
  feedback), so a test can see that feedback reached the model. Other tools get arguments filled
  from their JSON schema. A request without tools gets plain assistant text.
- A request with `response_format` (`json_schema` or `json_object`) and no tools gets the
  responder's arguments as JSON message content, for the schema's name (OpenAI's structured
  outputs; vLLM, llama.cpp and Ollama constrain decoding the same way).
- `usage` is deterministic: prompt_tokens = characters of all message contents // 4,
  completion_tokens = characters of the answer (arguments JSON or text) // 4.
- `"stream": true` is answered as server-sent events (same content, chunked like OpenAI).

Scripted answers (`fail_next`, `hang_next`, `answer_text_next`) go into ONE first-in-first-out
queue; each arriving request takes the next step (a step with `times=n` serves n requests), and
gets the default answer once the queue is empty. `reset()` clears the queue, the recorded
requests and the responder.

A slow or full server: `delay=L` answers every request after L seconds; `capacity=C` answers
429 (Retry-After `busy_retry_after`, 1 s) to a request that arrives while C are in flight.
`most_in_flight` and `refused_busy` say what it saw.

Servers that are not OpenAI (constructor arguments, all defaults as above):

- `tools="refuse"`: a request carrying `tools` or `tool_choice` gets HTTP `refusal_status`
  (400) with `refusal_message` (default "this model does not support tools", what Ollama says
  for a model without tool support; llama.cpp's server without jinja answers 500 "tools param
  requires --jinja flag").
- `tools="ignore"`: tools are accepted and never called: the answer is text (see `text`), as
  from llama.cpp's server, which reads an object `tool_choice` as "auto", or Ollama, which has
  no `tool_choice`.
- `response_format="refuse"` / `"ignore"`: the same for `response_format`.
- `text="prose"` (default) | `"json"` | `"fenced"`: what a text answer is: polite prose, the
  responder's arguments as a bare JSON object, or that object in a ```json fence with a
  sentence around it (a model asked for JSON in the prompt).
- A refused request takes no scripted step: those script what the model answers.

    FakeLLM(tools="refuse")                                           # tools refused
    FakeLLM(tools="refuse", response_format="refuse", text="fenced")  # JSON in text only

Every request is recorded in `requests` (a snapshot list): the parsed JSON body plus the keys
"authorization" (header value or None), "headers" (all headers, lower-case names),
"received_at" (time.time()) and "answer" (what it got: "tool_call", "json_schema" (JSON content
for a response format), "text", "error 503", ...).
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Literal

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .server import ThreadedServer

Responder = Callable[[dict[str, Any]], dict[str, Any]]
Support = Literal["call", "refuse", "ignore"]  # what a server does with `tools`
FormatSupport = Literal["honor", "refuse", "ignore"]  # ... with `response_format`
TextStyle = Literal["prose", "json", "fenced"]

TOOLS_REFUSAL = "this model does not support tools"
FORMAT_REFUSAL = 'response_format type must be one of "text" or "json_object", but got: json_schema'

DRAFT_SUMMARY = "Customer asks about their ticket"
FEEDBACK_PREFIX = "- "

# status -> (error type, error code), as api.openai.com labels them
_ERROR_KINDS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    409: ("invalid_request_error", "conflict"),
    422: ("invalid_request_error", None),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    502: ("server_error", None),
    503: ("server_error", "service_unavailable"),
    504: ("server_error", None),
}

_ERROR_MESSAGES: dict[int, str] = {
    400: "Invalid request.",
    401: "Incorrect API key provided.",
    403: "Access denied.",
    404: "The model does not exist or you do not have access to it.",
    429: "Rate limit reached for requests.",
    500: "The server had an error while processing your request.",
    502: "Bad gateway.",
    503: "The engine is currently overloaded, please try again later.",
}


# --------------------------------------------------------------------------------------------
# Reading the request


def content_text(content: Any) -> str:
    """The text of a message's `content`: a string, a list of parts, or None."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "\n".join(parts)
    return str(content)


def last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            return content_text(message.get("content"))
    return ""


def feedback_lines(text: str) -> list[str]:
    """Lines that start with "- " (leading blanks allowed), stripped of surrounding blanks."""
    return [line.strip() for line in text.splitlines() if line.lstrip().startswith(FEEDBACK_PREFIX)]


def chosen_tool(body: dict[str, Any]) -> dict[str, Any] | None:
    """The function the request forces (`tool_choice.function.name`), else its first tool."""
    tools = [
        t["function"]
        for t in body.get("tools") or []
        if isinstance(t, dict) and isinstance(t.get("function"), dict)
    ]
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
        for tool in tools:
            if tool.get("name") == name:
                return tool
        if name:
            return {"name": name, "parameters": {}}
    return tools[0] if tools else None


def asked_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The `response_format` JSON schema as a function-like {"name", "parameters"}, if any."""
    fmt = body.get("response_format")
    if not isinstance(fmt, dict):
        return None
    if fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema") or {}
        return {"name": spec.get("name"), "parameters": spec.get("schema") or {}}
    if fmt.get("type") == "json_object":
        return {"name": "Draft", "parameters": fmt.get("schema") or {}}
    return None


def wants_tools(body: dict[str, Any]) -> bool:
    return bool(body.get("tools")) or body.get("tool_choice") is not None


def prompt_tokens(body: dict[str, Any]) -> int:
    chars = sum(
        len(content_text(m.get("content")))
        for m in body.get("messages") or []
        if isinstance(m, dict)
    )
    return chars // 4


# --------------------------------------------------------------------------------------------
# The default responder


def polite_reply(feedback: list[str]) -> str:
    lines = [
        "Hello,",
        "",
        "Thank you for contacting us. We have looked into your ticket and are on it.",
    ]
    if feedback:
        lines += ["", "Following your notes:", *feedback]
    lines += ["", "Kind regards,", "Support"]
    return "\n".join(lines)


def _schema_value(name: str, schema: dict[str, Any]) -> Any:
    if schema.get("enum"):
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf"):
        options = [o for o in schema.get(key) or [] if o.get("type") != "null"]
        if options:
            return _schema_value(name, options[0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "integer":
        return 0
    if kind == "number":
        return 0.0
    if kind == "boolean":
        return False
    if kind == "array":
        return []
    if kind == "object":
        return schema_arguments(schema)
    return name


def schema_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Deterministic arguments for a JSON schema: every property, first enum value, etc."""
    properties = schema.get("properties") or {}
    return {name: _schema_value(name, sub or {}) for name, sub in properties.items()}


def default_responder(body: dict[str, Any]) -> dict[str, Any]:
    # the forced tool, else the response format's schema, else (JSON asked in the prompt) Draft
    tool = chosen_tool(body) or asked_schema(body) or {"name": "Draft"}
    parameters = tool.get("parameters") or {}
    arguments = schema_arguments(parameters)
    if tool.get("name") == "Draft":
        enum = ((parameters.get("properties") or {}).get("category") or {}).get("enum") or []
        arguments["category"] = "refund" if "refund" in enum or not enum else enum[0]
        arguments["summary"] = DRAFT_SUMMARY
        arguments["reply"] = polite_reply(feedback_lines(last_user_text(body)))
    return arguments


def default_text(body: dict[str, Any]) -> str:
    return polite_reply(feedback_lines(last_user_text(body)))


# --------------------------------------------------------------------------------------------
# Scripted answers


@dataclass
class _Step:
    kind: str  # "fail" | "hang" | "text"
    times: int
    status: int = 0
    retry_after: float | None = None
    message: str | None = None
    code: str | None = None
    seconds: float = 0.0
    text: str = ""


def _header_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def error_body(status: int, message: str | None = None, code: str | None = None) -> dict[str, Any]:
    kind, default_code = _ERROR_KINDS.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None)
    )
    return {
        "error": {
            "message": message or _ERROR_MESSAGES.get(status, f"Error {status}."),
            "type": kind,
            "param": None,
            "code": code if code is not None else default_code,
        }
    }


class FakeLLM:
    """An OpenAI-compatible chat-completions server on 127.0.0.1, in a background thread."""

    def __init__(
        self,
        model: str | None = None,
        *,
        tools: Support = "call",
        response_format: FormatSupport = "honor",
        text: TextStyle = "prose",
        refusal_status: int = 400,
        refusal_message: str | None = None,
        delay: float = 0.0,
        capacity: int | None = None,
        busy_retry_after: float | None = 1.0,
    ) -> None:
        self.model = model  # answered as "model"; None echoes the request's model
        # a model that takes its time: every answer after `delay` seconds; and one that fills
        # up: a request beyond `capacity` in flight gets 429 (Retry-After `busy_retry_after`)
        self.delay = delay
        self.capacity = capacity
        self.busy_retry_after = busy_retry_after
        self.in_flight = 0
        self.most_in_flight = 0  # the most requests it was answering at once
        self.refused_busy = 0
        self.tools = tools
        self.response_format = response_format
        self.text = text
        self.refusal_status = refusal_status
        self.refusal_message = refusal_message
        self.responder: Responder = default_responder
        self.outage: Literal["error", "hang"] | None = None  # `down()`
        self.outage_status = 500
        self.outage_seconds = 60.0
        self._lock = threading.Lock()
        self._requests: list[dict[str, Any]] = []
        self._steps: deque[_Step] = deque()
        self._counter = 0
        self.app = Starlette(
            routes=[Route("/v1/chat/completions", self._chat_completions, methods=["POST"])]
        )
        self._server = ThreadedServer(self.app, name="FakeLLM")

    # ---- lifecycle ---------------------------------------------------------------------------

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def url(self) -> str:
        """Base URL for the client, ending in /v1."""
        if not self.port:
            raise RuntimeError("FakeLLM is not started")
        return f"{self._server.base_url}/v1"

    def start(self, timeout: float = 10.0) -> FakeLLM:
        self._server.start(timeout, port=self._server.port)  # after `stop`: the same port
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving (requests still hanging are woken and answered first). Idempotent."""
        self._server.stop(timeout)

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- scripting ---------------------------------------------------------------------------

    def fail_next(
        self,
        status: int,
        times: int = 1,
        retry_after: float | None = None,
        *,
        message: str | None = None,
        code: str | None = None,
    ) -> None:
        """The next `times` requests get HTTP `status` with an OpenAI-style error body
        ({"error": {"message", "type", "param", "code"}}); `Retry-After` set when given."""
        self._push(
            _Step("fail", times, status=status, retry_after=retry_after, message=message, code=code)
        )

    def hang_next(self, seconds: float, times: int = 1) -> None:
        """The next `times` requests sleep `seconds` before getting the default answer."""
        self._push(_Step("hang", times, seconds=seconds))

    def down(
        self, how: Literal["error", "hang"] = "error", *, status: int = 500, seconds: float = 60.0
    ) -> None:
        """An outage until `restore()`: every request gets HTTP `status` ("error"), or hangs
        `seconds` before its answer ("hang"). (A server that refuses connections: `stop()`,
        then `start()` again on the same port.)"""
        with self._lock:
            self.outage, self.outage_status, self.outage_seconds = how, status, seconds

    def restore(self) -> None:
        """The outage is over: requests are answered again."""
        with self._lock:
            self.outage = None

    def answer_text_next(self, text: str, times: int = 1) -> None:
        """The next `times` requests get plain assistant `text`, no tool call."""
        self._push(_Step("text", times, text=text))

    def reset(self) -> None:
        """Forget queued steps and recorded requests; restore the default responder."""
        with self._lock:
            self._steps.clear()
            self._requests.clear()
            self.most_in_flight = self.refused_busy = 0
        self.responder = default_responder

    def _push(self, step: _Step) -> None:
        if step.times < 1:
            raise ValueError("times must be >= 1")
        with self._lock:
            self._steps.append(step)

    def _take(self, record: dict[str, Any], *, step: bool = True) -> tuple[int, _Step | None]:
        """Record the request and take the next scripted step (atomically)."""
        with self._lock:
            self._requests.append(record)
            self._counter += 1
            taken = None
            if step and self._steps:
                taken = self._steps[0]
                taken.times -= 1
                if taken.times == 0:
                    self._steps.popleft()
            return self._counter, taken

    @property
    def pending(self) -> int:
        """How many requests the queued steps will still serve."""
        with self._lock:
            return sum(s.times for s in self._steps)

    # ---- what was asked ----------------------------------------------------------------------

    @property
    def requests(self) -> list[dict[str, Any]]:
        """A snapshot of every request so far, oldest first."""
        with self._lock:
            return list(self._requests)

    # ---- the endpoint ------------------------------------------------------------------------

    async def _chat_completions(self, request: Request) -> Response:
        with self._lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            busy = self.capacity is not None and self.in_flight > self.capacity
            if busy:
                self.refused_busy += 1
        try:
            if self.outage == "error":
                self._take({"outage": self.outage_status}, step=False)
                status = self.outage_status
                return JSONResponse(error_body(status), status)
            if self.outage == "hang":
                self._take({"outage": "hang"}, step=False)
                await request.body()  # read (and kept) before a client gives up on the answer
                until = time.monotonic() + self.outage_seconds
                while self.outage == "hang" and time.monotonic() < until:  # or `restore()`
                    await self._server.sleep(0.1)
            if busy:
                headers = {}
                if self.busy_retry_after is not None:
                    headers["retry-after"] = _header_number(self.busy_retry_after)
                message = "Rate limit reached: too many requests in flight"
                return JSONResponse(error_body(429, message), 429, headers=headers)
            if self.delay:
                await self._server.sleep(self.delay)
            return await self._answer(request)
        finally:
            with self._lock:
                self.in_flight -= 1

    async def _answer(self, request: Request) -> Response:
        received_at = time.time()
        raw = await request.body()
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise ValueError("not an object")
        except ValueError:
            body = {"_invalid_body": raw.decode("utf-8", "replace")}
        record = copy.deepcopy(body)
        record["authorization"] = request.headers.get("authorization")
        record["headers"] = dict(request.headers)
        record["received_at"] = received_at
        refused = None if "_invalid_body" in body else self._refusal(body)
        number, step = self._take(record, step=refused is None)  # a refusal takes no step

        if "_invalid_body" in body:
            record["answer"] = "error 400"
            return JSONResponse(error_body(400, "We could not parse the JSON body."), 400)

        if step is not None and step.kind == "fail":
            record["answer"] = f"error {step.status}"
            headers = {}
            if step.retry_after is not None:
                headers["retry-after"] = _header_number(step.retry_after)
            return JSONResponse(
                error_body(step.status, step.message, step.code), step.status, headers=headers
            )
        if refused is not None:
            record["answer"] = f"error {self.refusal_status}"
            return JSONResponse(error_body(self.refusal_status, refused), self.refusal_status)
        if step is not None and step.kind == "hang":
            await self._server.sleep(step.seconds)

        answer = "text"
        try:
            if step is not None and step.kind == "text":
                text, call = step.text, None
            elif self.tools == "call" and chosen_tool(body) is not None:
                tool = chosen_tool(body) or {}
                arguments = json.dumps(self.responder(body))
                text, call = None, {"name": tool.get("name"), "arguments": arguments}
                answer = "tool_call"
            elif self.response_format == "honor" and asked_schema(body) is not None:
                text, call = json.dumps(self.responder(body)), None
                answer = "json_schema"
            else:
                text, call = self._text(body), None
        except Exception as exc:
            record["answer"] = "error 500"
            message = f"FakeLLM responder raised {exc!r}"
            return JSONResponse(error_body(500, message), 500)

        record["answer"] = answer
        completion = _completion(
            number, self.model or str(body.get("model", "fake")), body, text, call
        )
        if body.get("stream"):
            return StreamingResponse(
                _sse(completion, body), media_type="text/event-stream; charset=utf-8"
            )
        return JSONResponse(completion)

    def _refusal(self, body: dict[str, Any]) -> str | None:
        """The error message when this server refuses what the request carries."""
        if self.tools == "refuse" and wants_tools(body):
            return self.refusal_message or TOOLS_REFUSAL
        if self.response_format == "refuse" and body.get("response_format") is not None:
            return self.refusal_message or FORMAT_REFUSAL
        return None

    def _text(self, body: dict[str, Any]) -> str:
        if self.text == "prose":
            return default_text(body)
        arguments = json.dumps(self.responder(body), ensure_ascii=False, indent=1)
        if self.text == "json":
            return arguments
        return f"Here is the draft you asked for:\n\n```json\n{arguments}\n```\n\nAnything else?"


def _completion(
    number: int,
    model: str,
    body: dict[str, Any],
    text: str | None,
    call: dict[str, Any] | None,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if call is not None:
        message["tool_calls"] = [
            {
                "id": f"call_fake_{number}",
                "type": "function",
                "function": {"name": call["name"], "arguments": call["arguments"]},
            }
        ]
    prompt = prompt_tokens(body)
    completion = len(call["arguments"] if call is not None else text or "") // 4
    return {
        "id": f"chatcmpl-fake-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls" if call is not None else "stop",
                "message": message,
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


async def _sse(completion: dict[str, Any], body: dict[str, Any]) -> AsyncIterator[str]:
    """The completion as OpenAI streams it: role, content/arguments, finish, [usage], [DONE]."""
    choice = completion["choices"][0]
    message = choice["message"]
    head = {k: completion[k] for k in ("id", "created", "model")}
    head["object"] = "chat.completion.chunk"

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        data = {
            **head,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }
        return f"data: {json.dumps(data)}\n\n"

    if message.get("tool_calls"):
        call = message["tool_calls"][0]
        yield chunk(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "index": 0,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["function"]["name"], "arguments": ""},
                    }
                ],
            }
        )
        yield chunk(
            {"tool_calls": [{"index": 0, "function": {"arguments": call["function"]["arguments"]}}]}
        )
    else:
        yield chunk({"role": "assistant", "content": ""})
        yield chunk({"content": message["content"] or ""})
    yield chunk({}, choice["finish_reason"])
    if (body.get("stream_options") or {}).get("include_usage"):
        yield f"data: {json.dumps({**head, 'choices': [], 'usage': completion['usage']})}\n\n"
    yield "data: [DONE]\n\n"
