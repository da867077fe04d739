"""The built-in offline draft model: deterministic, no network, same chat-model interface.

Used when no LLM endpoint is configured, so `desk up` drafts the demo tickets anywhere. It
classifies by keywords and writes to the round's newest customer message: when the prompt
offers knowledge passages, the sentences of the one that best answers that message (cited);
when it offers none, no policy at all, only what the team will do and what it needs from the
customer. It follows the reviewers' simple instructions (feedback, and the standing
instructions of its category: "do not write 'X'", "say that X", "ask for X", apologise, shorter,
more formal) and never copies them into the reply; the summary counts those it could not
follow. A fallback for demos and tests, not a stand-in for quality.
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

from shared import similarity

from .categories import NEXT, classify, needs
from .instructions import SENTENCE_END, guided
from .prompt import FEEDBACK_HEADER, INSTRUCTIONS_HEADER

_CJK = re.compile(r"[\u4e00-\u9fff]")
_TICKET = re.compile(r"<ticket>\s*(.*?)\s*</ticket>", re.DOTALL)
_KNOWLEDGE = re.compile(r"<knowledge>\s*(.*?)\s*</knowledge>", re.DOTALL)
FACT_SENTENCES = 3  # of the passage that best answers the newest message, quoted as facts


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


def _standing(prompt: str, category: str) -> list[str]:
    """The standing instructions of `category` (the prompt's "- category: text" lines)."""
    found = [line.split(": ", 1) for line in _section(prompt, INSTRUCTIONS_HEADER)]
    return [pair[1] for pair in found if len(pair) == 2 and pair[0] == category]


def _quoted(pattern: re.Pattern[str], prompt: str) -> Any:
    found = pattern.search(prompt)
    if not found:
        return None
    try:
        return json.loads(found.group(1))
    except json.JSONDecodeError:
        return None


def _offered(prompt: str) -> list[dict[str, str]]:
    """The knowledge passages the prompt offers (none: no passage applies)."""
    passages = _quoted(_KNOWLEDGE, prompt)
    if not isinstance(passages, list):
        return []
    return [
        p
        for p in passages
        if isinstance(p, dict)
        and isinstance(p.get("article"), str)
        and isinstance(p.get("text"), str)
    ]


def _newest(body: str) -> str:
    """The round's newest customer message: the last paragraph of what the reply answers (the
    round's messages are quoted oldest first)."""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", body) if p.strip()]
    return paragraphs[-1] if paragraphs else ""


def _question(text: str) -> str | None:
    """The last question `text` asks, if it asks one."""
    asked = [s for s in SENTENCE_END.split(" ".join(text.split())) if s.endswith(("?", "？"))]
    return asked[-1] if asked else None


def _facts(passages: list[dict[str, str]], question: str, said: str) -> str:
    """The sentences of `passages` (one article's, best first) that answer the newest message,
    on one line and in the articles' order: the policy as the article states it. A sentence
    scores the terms it shares with the customer's `question` twice and those it shares with
    the rest of what they `said` once; the first sentences when none shares a term."""
    sentences = [s for p in passages for s in SENTENCE_END.split(" ".join(p["text"].split())) if s]
    asked, told = similarity.terms(question), similarity.terms(said)
    score = [
        2 * len(similarity.terms(s) & asked) + len(similarity.terms(s) & told) for s in sentences
    ]
    if not any(score):
        return " ".join(sentences[:FACT_SENTENCES])
    best = sorted(range(len(sentences)), key=lambda i: -score[i])[:FACT_SENTENCES]
    return " ".join(sentences[i] for i in sorted(best) if score[i])


def _answering(offered: list[dict[str, str]], about: str) -> list[dict[str, str]]:
    """The offered passages of the article that shares most terms with `about` (the newest
    message; the best ranked on a tie), best first."""
    wanted = similarity.terms(about)
    best = max(offered, key=lambda p: len(similarity.terms(p["text"]) & wanted))
    return [p for p in offered if p["article"] == best["article"]]


def compose(prompt: str) -> dict[str, Any]:
    """The Draft arguments for one prompt (the human message the drafter builds)."""
    quoted = _quoted(_TICKET, prompt)
    ticket: dict[str, Any] = quoted if isinstance(quoted, dict) else {}
    offered = _offered(prompt)
    sources: list[str] = []
    subject = str(ticket.get("subject") or "your request")
    body = str(ticket.get("body") or "")
    name = str(ticket.get("customer") or "").split(" ")[0] or "there"
    category = classify(f"{subject}\n{body}")
    about = " ".join(subject.split())
    newest = _newest(body)
    question = _question(newest)
    if ticket.get("followup") and not _CJK.search(body + subject):
        paragraphs = [
            f"Hi {name},",
            f"We are following up on your request about {about}. "
            "Has our last reply solved it, or is there anything else we can do for you?",
        ]
    elif _CJK.search(body + subject):
        paragraphs = [
            f"{name}，您好：",
            "感谢您的来信。我们已将您的问题转交给相关团队处理，处理结果将通过电子邮件通知您。",
        ]
    else:
        earlier = ticket.get("conversation") or []
        # a later round answers what the customer just wrote, not the ticket all over again
        later = any(isinstance(m, dict) and m.get("from") == "agent" for m in earlier)
        opening = (
            f"Thank you for getting back to us about “{about}”."
            if later
            else f"Thank you for your message about “{about}”."
        )
        if question:
            opening += f" You asked: “{question}”"
        paragraphs = [f"Hi {name},", opening]
        if offered:  # answer with what the team's article says, and cite it
            answering = _answering(offered, question or newest)
            paragraphs.append(_facts(answering, question or "", f"{subject}\n{newest}"))
            sources.append(answering[0]["article"])
            paragraphs.append(
                "We will follow up on it in this conversation." if later else NEXT[category]
            )
        else:  # nothing known applies: no policy, what the team does and what it needs
            paragraphs.append(" ".join([NEXT[category], *needs(category, body)]))
    guidance = [*_standing(prompt, category), *_section(prompt, FEEDBACK_HEADER)]
    paragraphs, declined = guided(paragraphs, guidance, name)
    paragraphs.append(
        "此致\n客服团队" if _CJK.search(body + subject) else "Best regards,\nThe Support Team"
    )
    summary = f"{category.capitalize()}: {about}"
    if declined:  # the reviewer sees what the offline model could not do, the customer never
        summary += f" (not applied: {len(declined)} instruction{'s' if len(declined) > 1 else ''})"
    return {
        "category": category,
        "summary": summary[:120],
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
