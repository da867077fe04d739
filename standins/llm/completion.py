"""The answer itself: a chat completion with deterministic usage, or the same streamed as
server-sent events."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from .request import prompt_tokens


def completion(
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


async def sse(completion: dict[str, Any], body: dict[str, Any]) -> AsyncIterator[str]:
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
