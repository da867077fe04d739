"""The state of one ticket thread, and the dependencies its nodes are given."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypedDict

from langchain_core.language_models import BaseChatModel

from shared.helpdesk import SourceSystem
from shared.settings import DrafterSettings
from shared.standing import StandingInstructions

from ..health import Health
from ..knowledge import Knowledge
from ..limiter import Limiter
from ..output import Output
from ..retrievers import retriever_of


class State(TypedDict, total=False):
    """Everything is JSON-plain so checkpoints round-trip without custom types."""

    thread: str
    ticket_id: str
    inline_ticket: dict[str, Any] | None  # a mail carries its own "ticket"
    trigger: dict[str, Any]  # source, type, event_id (queue, work_seq) of what started the round
    event_version: str | None  # the ticket version the event announced
    ticket: dict[str, Any]
    escalation: list[str]
    draft: dict[str, str]  # category, summary, reply: the model's latest draft
    notes: list[str]  # what intake found about the event (a mail claiming a conversation)
    warnings: list[str]
    feedback: list[str]  # every response so far, oldest first
    usage: dict[str, Any]  # input_tokens, output_tokens, usd of the latest draft
    version: int  # the version of the latest inbox item
    item: dict[str, Any]  # the latest inbox item (an InboxItem as JSON)
    decision: dict[str, Any]
    outcome: str  # closed | accepted | edited | ignored | acknowledged | withdrawn | quiet
    handled_version: str | None
    # the conversation: which round this run answers (see shared/conversation.py)
    plan: dict[str, Any]  # what started the run: {"kind": "answer"} or {"kind": "followup", "id"}
    round: str  # the round id
    round_kind: str  # answer | followup
    round_messages: list[str]  # ids of the customer messages the round answers
    seen_through: str | None  # the newest message of the conversation when last drafted
    covered: str | None  # the newest message answered by a round this thread already closed
    covered_before: dict[str, str | None]  # per round: `covered` when it began (to roll back)
    cause: str | None  # why the next version is drafted (feedback, the customer wrote again)
    withdrawn: str  # why a waiting draft was taken back


@dataclass(frozen=True)
class Deps:
    source: SourceSystem
    model: BaseChatModel
    output: Output = "auto"  # how the model returns its Draft (DESK_LLM_OUTPUT)
    price_input: float = 0.0  # USD per million tokens
    price_output: float = 0.0
    max_reply_chars: int = 3000
    allow_links: bool = False
    knowledge: Knowledge | None = None  # DESK_KNOWLEDGE_DIR: passages each draft is given
    passages: int = 3
    examples: int = 3  # DESK_EXAMPLES: replies reviewers sent for similar rounds (memory)
    # the standing instructions the inbox learned (shared.standing); None: no broker (tests)
    standing: Callable[[], Awaitable[StandingInstructions]] | None = None
    # the model's calls in flight (DESK_LLM_CONCURRENCY); None: the offline model, no limit
    limiter: Limiter | None = None
    # the model endpoint's breaker: an outage is waited out; None: the offline model, `desk eval`
    health: Health | None = None

    @classmethod
    def configured(cls, settings: DrafterSettings, source: SourceSystem) -> Deps:
        """What the drafter's settings say: the model (offline without an endpoint), its
        prices and checks, and the knowledge base."""
        from ..model import make_model, output_for

        model = make_model(settings)
        remote = bool(settings.llm_base_url)
        return cls(
            limiter=Limiter(settings.llm_concurrency) if remote else None,
            health=Health(
                down_after=settings.llm_down_after,
                probe_interval=settings.llm_probe_interval,
                ticket_failures=settings.llm_ticket_failures,
            )
            if remote
            else None,
            source=source,
            model=model,
            output=output_for(model, settings),
            price_input=settings.llm_price_input,
            price_output=settings.llm_price_output,
            max_reply_chars=settings.max_reply_chars,
            allow_links=settings.allow_links,
            knowledge=Knowledge(
                settings.knowledge_dir,
                retriever=retriever_of(
                    settings.knowledge_retriever,
                    settings.embeddings_model,
                    settings.knowledge_floor,
                ),
            )
            if settings.knowledge_dir or settings.helpdesk_articles_path
            else None,
            passages=settings.knowledge_passages,
            examples=settings.examples,
        )
