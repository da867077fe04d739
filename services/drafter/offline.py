"""The built-in offline draft model: deterministic, no network, same chat-model interface.

Used when no LLM endpoint is configured, so `desk up` drafts the demo tickets anywhere. It
classifies by keywords, fills a reply template per category, and adds each piece of reviewer
feedback to the reply visibly. A fallback for demos and tests, not a stand-in for quality.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool

from .prompt import FEEDBACK_HEADER

_KEYWORDS: list[tuple[str, tuple[str, ...]]] = [
    (
        "refund",
        (
            *("refund", "money back", "reimburse"),
            *("rückerstattung", "remboursement", "reembolso", "退款", "退钱"),
        ),
    ),
    (
        "invoice",
        ("invoice", "receipt", "vat", "tax id", "rechnung", "facture", "factura", "发票", "收据"),
    ),
    (
        "billing",
        (
            "charged twice",
            "double charge",
            "duplicate charge",
            "charged",
            "payment",
            "billing",
            "overcharge",
            "subscription fee",
            "cancel",
            "débité",
            "扣款",
            "扣费",
        ),
    ),
    (
        "account",
        (
            "password",
            "log in",
            "login",
            "sign in",
            "locked out",
            "2fa",
            "two-factor",
            "account access",
            "verification code",
            "账号",
            "密码",
            "登录",
        ),
    ),
    (
        "bug",
        (
            "error",
            "crash",
            "bug",
            "broken",
            "doesn't work",
            "does not work",
            "not working",
            "fails",
            "failed",
            "export",
            "崩溃",
            "错误",
        ),
    ),
]

_TEMPLATES = {
    "refund": "Thank you for getting in touch about a refund. I have passed your request to our "
    "billing team with the details of your order; they will review it and confirm the outcome "
    "to you by email.",
    "billing": "Thank you for letting us know about the charge on your account. I have asked our "
    "billing team to check the payments on your account; a charge taken in error will be "
    "reversed, and we will confirm by email once it is done.",
    "invoice": "Thank you for your message about your invoice. I have asked our billing team to "
    "issue the document you need with the correct details; you will receive it by email.",
    "bug": "Thank you for reporting this problem, and sorry for the trouble it is causing. I have "
    "shared your description with our engineering team, who are looking into it. Please reply "
    "with any error message you see; we will let you know as soon as it is fixed.",
    "account": "Thank you for reaching out about access to your account. For your security we "
    "verify your identity before changing anything: please reply from the email address "
    "registered on the account and we will take it from there.",
    "other": "Thank you for your message. I have passed it to the right team and we will get "
    "back to you shortly.",
}

_CJK = re.compile(r"[\u4e00-\u9fff]")
_TICKET = re.compile(r"<ticket>\s*(.*?)\s*</ticket>", re.DOTALL)
_KNOWLEDGE = re.compile(r"<knowledge>\s*(.*?)\s*</knowledge>", re.DOTALL)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
FACT_SENTENCES = 3  # of the best passage, quoted as the answer's facts


def classify(text: str) -> str:
    lowered = text.lower()
    for category, words in _KEYWORDS:
        if any(word in lowered for word in words):
            return category
    return "other"


def _section(text: str, header: str) -> list[str]:
    if header not in text:
        return []
    lines = text.split(header, 1)[1].strip().splitlines()
    items = []
    for line in lines:
        if not line.startswith("- "):
            break
        items.append(line[2:].strip())
    return items


def _sentence(text: str) -> str:
    text = text.strip()
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?。！？" else text + "."


def _quoted(pattern: re.Pattern[str], prompt: str) -> Any:
    found = pattern.search(prompt)
    if not found:
        return None
    try:
        return json.loads(found.group(1))
    except json.JSONDecodeError:
        return None


def _best_passage(prompt: str) -> dict[str, str] | None:
    """The first (best) knowledge passage the prompt quotes, if any."""
    passages = _quoted(_KNOWLEDGE, prompt)
    if isinstance(passages, list) and passages and isinstance(passages[0], dict):
        best = passages[0]
        if isinstance(best.get("article"), str) and isinstance(best.get("text"), str):
            return best
    return None


def _facts(text: str) -> str:
    """The passage's first sentences, on one line: the policy as the article states it."""
    sentences = _SENTENCE_END.split(" ".join(text.split()))
    return " ".join(sentences[:FACT_SENTENCES])


def _action(category: str) -> str:
    """The category's template without its opening thanks (the reply has thanked already)."""
    thanks, _, rest = _TEMPLATES[category].partition(". ")
    return rest or thanks


def compose(prompt: str) -> dict[str, Any]:
    """The Draft arguments for one prompt (the human message the drafter builds)."""
    quoted = _quoted(_TICKET, prompt)
    ticket: dict[str, Any] = quoted if isinstance(quoted, dict) else {}
    best = _best_passage(prompt)
    sources: list[str] = []
    subject = str(ticket.get("subject") or "your request")
    body = str(ticket.get("body") or "")
    name = str(ticket.get("customer") or "").split(" ")[0] or "there"
    category = classify(f"{subject}\n{body}")
    feedback = _section(prompt, FEEDBACK_HEADER)
    if ticket.get("followup") and not _CJK.search(body + subject):
        paragraphs = [
            f"Hi {name},",
            f"We are following up on your request about {' '.join(subject.split())}. "
            "Has our last reply solved it, or is there anything else we can do for you?",
        ]
        paragraphs += [_sentence(f) for f in feedback]
        paragraphs.append("Best regards,\nThe Support Team")
    elif _CJK.search(body + subject):
        paragraphs = [
            f"{name}，您好：",
            "感谢您的来信。我们已将您的问题转交给相关团队处理，处理结果将通过电子邮件通知您。",
        ]
        paragraphs += [_sentence(f) for f in feedback]
        paragraphs.append("此致\n客服团队")
    else:
        paragraphs = [f"Hi {name},", _TEMPLATES[category]]
        earlier = ticket.get("conversation") or []
        about = " ".join(subject.split())
        # a later round answers what the customer just wrote, not the ticket all over again
        later = any(isinstance(m, dict) and m.get("from") == "agent" for m in earlier)
        if best is not None:  # answer with what the team's article says, and cite it
            paragraphs[1:2] = [
                f"Thank you for getting back to us about “{about}”."
                if later
                else f"Thank you for your message about “{about}”.",
                _facts(best["text"]),
                "We will follow up on it in this conversation." if later else _action(category),
            ]
            sources.append(best["article"])
        elif later:
            paragraphs[1] = (
                f"Thank you for getting back to us about {about}. We have noted what you wrote "
                "and will follow up on it in this conversation."
            )
        paragraphs += [_sentence(f) for f in feedback]
        paragraphs.append("Best regards,\nThe Support Team")
    summary = f"{category.capitalize()}: {' '.join(subject.split())}"[:120]
    return {
        "category": category,
        "summary": summary,
        "reply": "\n\n".join(paragraphs),
        "sources": sources,
    }


class OfflineDraftModel(BaseChatModel):
    """Answers every request with a `Draft` tool call computed by `compose`."""

    @property
    def _llm_type(self) -> str:
        return "desk-offline"

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
        formatted = [convert_to_openai_tool(tool) for tool in tools]
        return self.bind(tools=formatted, tool_choice=tool_choice, **kwargs)

    def with_structured_output(
        self, schema: Any, *, include_raw: bool = False, **kwargs: Any
    ) -> Any:
        kwargs.pop("method", None)  # function calling is the only way this model answers
        return super().with_structured_output(schema, include_raw=include_raw, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        tools = kwargs.get("tools") or []
        name = tools[0]["function"]["name"] if tools else "Draft"
        prompt = str(messages[-1].content) if messages else ""
        args = compose(prompt)
        prompt_chars = sum(len(str(m.content)) for m in messages)
        output_chars = len(json.dumps(args, ensure_ascii=False))
        usage = {
            "input_tokens": prompt_chars // 4,
            "output_tokens": output_chars // 4,
            "total_tokens": prompt_chars // 4 + output_chars // 4,
        }
        call_id = "offline-" + hashlib.sha1(prompt.encode()).hexdigest()[:12]
        message = AIMessage(
            content="",
            tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}],
            usage_metadata=usage,  # type: ignore[typeddict-item]
        )
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        # Pure computation in microseconds: no worker thread (the default hands it to one).
        return self._generate(messages, stop, **kwargs)
