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

from .errors import error_body
from .fake import FakeLLM, FormatSupport, Support, TextStyle
from .request import asked_schema, chosen_tool, content_text
from .responder import Responder, default_responder, schema_arguments

__all__ = [
    "FakeLLM",
    "FormatSupport",
    "Responder",
    "Support",
    "TextStyle",
    "asked_schema",
    "chosen_tool",
    "content_text",
    "default_responder",
    "error_body",
    "schema_arguments",
]
