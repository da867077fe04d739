"""One draft written: the prompt, the model's answer, the checks, and one redraft when the
checks fail (the problems named). The graph's `draft` node and `desk eval` both write with it,
so an evaluation measures exactly what the drafter does."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from . import checks, model, prompt
from .examples import Example
from .graph.state import Deps
from .knowledge import Passage


@dataclass(frozen=True)
class Written:
    draft: prompt.Draft | None  # None: no usable draft, twice (`problems` says why)
    problems: list[str]  # what the checks still found after the redraft (warnings)
    input_tokens: int
    output_tokens: int
    usd: float


@dataclass(frozen=True)
class Asked:
    """What the model is given besides the ticket."""

    feedback: list[str] = field(default_factory=list)
    passages: list[Passage] = field(default_factory=list)
    examples: list[Example] = field(default_factory=list)
    instructions: dict[str, list[str]] = field(default_factory=dict)
    system: str = prompt.SYSTEM


async def write(
    deps: Deps, ticket: dict[str, Any], round_: dict[str, Any], asked: Asked
) -> Written:
    problems: list[str] = []
    screened: list[str] = []  # foreign data: warnings for a person, never hints to the model
    before: list[str] = []  # what the screen found in a draft that was redrafted
    tokens_in = tokens_out = 0
    answer = None
    for attempt in (1, 2):  # a draft that fails the checks is redrafted once
        messages = prompt.messages(
            ticket,
            asked.feedback,
            problems,
            round_,
            asked.passages,
            asked.examples,
            asked.instructions,
            system=asked.system,
        )
        answer = await model.ask(deps.model, messages, deps.output, deps.limiter, deps.health)
        tokens_in += answer.input_tokens
        tokens_out += answer.output_tokens
        if answer.draft is None:
            problems, screened = [answer.problem or "no draft"], []
        else:
            # a thread: a long conversation takes the screen a second, the loop has heartbeats
            screened = await asyncio.to_thread(_screened, answer.draft, ticket, asked)
            problems = checks.draft_problems(
                answer.draft.summary,
                answer.draft.reply,
                max_reply_chars=deps.max_reply_chars,
                allow_links=deps.allow_links,
                sources=answer.draft.sources,
                given={p.article for p in asked.passages},
            )
        if not problems:
            break
        if attempt == 1:
            before = screened
    assert answer is not None
    usd = (tokens_in * deps.price_input + tokens_out * deps.price_output) / 1_000_000
    if answer.draft is not None:  # a steered first draft is worth a look, however clean the next
        standing = [text for texts in asked.instructions.values() for text in texts]
        problems = [
            *problems,
            *checks.repeated_guidance(answer.draft.reply, asked.feedback, standing),
            *screened,
        ]
        problems += [f"the draft before the redraft: {w}" for w in before if w not in screened]
    return Written(answer.draft, problems, tokens_in, tokens_out, round(usd, 6))


def _screened(draft: prompt.Draft, ticket: dict[str, Any], asked: Asked) -> list[str]:
    """The foreign-data screen on a draft, against the passages it cites and the reviewers'
    feedback on it: the texts its inbox item carries, which the inbox screens again."""
    cited = [p for p in asked.passages if p.article in set(draft.sources)]
    return checks.foreign_data(draft.reply, ticket, cited, asked.feedback)
