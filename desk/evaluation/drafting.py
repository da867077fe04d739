"""Drafting the cases as the drafter drafts, with a candidate model, prompt, knowledge base
and retriever."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, get_args

from pydantic import ValidationError

from shared.errors import DeskError, first_error
from shared.settings import ConfigError, DrafterSettings, RetrieverName

from .cases import Case, CaseFile
from .criteria import met, quotations
from .errors import EvalError
from .outcome import Outcome
from .report import Report

RETRIEVERS = get_args(RetrieverName)  # DESK_KNOWLEDGE_RETRIEVER's choices


async def evaluate(case: Case, deps: Any, system: str) -> Outcome:
    from services.drafter import Asked, query, write
    from shared import similarity

    ticket, round_ = case.ticket()
    outcome = Outcome(case.id, case.category, case.articles)
    passages = []
    if deps.knowledge is not None:
        passages = deps.knowledge.search(query(ticket, round_), deps.passages)
    outcome.retrieved = list(dict.fromkeys(p.article for p in passages))
    if case.articles:
        outcome.retrieval_hit = bool(set(case.articles) & set(outcome.retrieved))
    try:
        written = await write(deps, ticket, round_, Asked(passages=passages, system=system))
    except DeskError as exc:
        outcome.error = str(exc)
        return outcome
    outcome.input_tokens, outcome.output_tokens = written.input_tokens, written.output_tokens
    outcome.usd = written.usd
    if written.draft is None:
        outcome.error = f"no usable draft: {written.problems[0]}"
        return outcome
    outcome.drafted_category = written.draft.category
    outcome.reply = written.draft.reply
    outcome.cited = list(written.draft.sources)
    if deps.knowledge is not None:
        outcome.quotations = quotations(outcome.reply, deps.knowledge.passages)
        outcome.quoted = list(outcome.quotations)
    outcome.warnings = written.problems
    outcome.missing = [c for c in case.must if not met(c, written.draft.reply)]
    outcome.said = [c for c in case.must_not if met(c, written.draft.reply)]
    outcome.criteria = len(case.must) + len(case.must_not)
    outcome.criteria_met = outcome.criteria - len(outcome.missing) - len(outcome.said)
    if case.reference:
        outcome.similarity = similarity.likeness(written.draft.reply, case.reference)
    return outcome


def configured(settings: DrafterSettings) -> tuple[Any, str]:
    """What a candidate drafts with (no helpdesk: every case carries its conversation), and
    the model's name."""
    from services.drafter import Deps, OfflineDraftModel

    try:
        deps = Deps.configured(settings, source=None)  # type: ignore[arg-type]
    except ConfigError as exc:  # the embeddings retriever without its packages or model
        raise EvalError(str(exc)) from None
    offline = isinstance(deps.model, OfflineDraftModel)
    return deps, "offline (built-in)" if offline else settings.llm_model


def candidate(
    model: str | None, knowledge: Path | None, retriever: str | None = None
) -> DrafterSettings:
    """The drafter's settings with a candidate model, knowledge base and retriever; the demo's
    articles when none is configured and no helpdesk is (what `desk up` gives the demo's
    drafter)."""
    from ..helpdesk import DEMO_KNOWLEDGE

    try:
        settings = DrafterSettings()
    except ValidationError as exc:
        raise EvalError(first_error(exc, "settings")) from None
    except ConfigError as exc:
        raise EvalError(str(exc)) from None
    update: dict[str, Any] = {}
    if model:
        update["llm_model"] = model
    if retriever:
        update["knowledge_retriever"] = retriever
    if knowledge:
        update["knowledge_dir"] = knowledge
    elif settings.knowledge_dir is None and not {"DESK_HELPDESK_URL", "DESK_HELPDESK_KIND"} & set(
        os.environ
    ):
        update["knowledge_dir"] = DEMO_KNOWLEDGE
    return settings.model_copy(update=update)


async def run(cases: CaseFile, settings: DrafterSettings, system: str, prompt_name: str) -> Report:
    from services.drafter import close_model

    deps, name = configured(settings)
    try:
        outcomes = [await evaluate(case, deps, system) for case in cases.cases]
    finally:
        await close_model(deps.model)
    knowledge = str(settings.knowledge_dir) if settings.knowledge_dir else "none"
    if deps.knowledge is not None and settings.knowledge_retriever != "bm25":
        knowledge += f" ({settings.knowledge_retriever})"
    return Report(cases.name, cases.version, name, prompt_name, knowledge, outcomes, cases.sha256)


def prompt_of(path: Path | None) -> tuple[str, str]:
    """The system prompt to try (the built-in one without a file), and what to call it."""
    from services.drafter import Asked

    if path is None:
        return Asked().system, "built-in"
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        raise EvalError(f"cannot read the prompt {path}") from None
    if not text:
        raise EvalError(f"the prompt {path} is empty")
    return text, path.name
