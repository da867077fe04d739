"""`FakeLLM`: the server, its scripted answers and outages, and the endpoint that answers."""

from __future__ import annotations

import copy
import json
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Literal

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ..server import ThreadedServer
from .completion import completion, sse
from .errors import error_body, header_number
from .request import asked_schema, chosen_tool, wants_tools
from .responder import Responder, default_responder, default_text

Support = Literal["call", "refuse", "ignore"]  # what a server does with `tools`
FormatSupport = Literal["honor", "refuse", "ignore"]  # ... with `response_format`
TextStyle = Literal["prose", "json", "fenced"]

TOOLS_REFUSAL = "this model does not support tools"
FORMAT_REFUSAL = 'response_format type must be one of "text" or "json_object", but got: json_schema'


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
                    headers["retry-after"] = header_number(self.busy_retry_after)
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
                headers["retry-after"] = header_number(step.retry_after)
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
        answered = completion(
            number, self.model or str(body.get("model", "fake")), body, text, call
        )
        if body.get("stream"):
            return StreamingResponse(
                sse(answered, body), media_type="text/event-stream; charset=utf-8"
            )
        return JSONResponse(answered)

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
