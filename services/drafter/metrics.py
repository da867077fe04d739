"""Drafter metrics: drafts by category and outcome, latency, tokens and cost."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from shared.inbox import CATEGORIES, ESCALATION

DRAFTS = Counter(
    "desk_drafter_items_total",
    "Inbox items emitted, by category and kind (draft, redraft, notify).",
    ["category", "kind"],
)
OUTCOMES = Counter(
    "desk_drafter_outcomes_total",
    "Thread outcomes (closed, accepted, edited, ignored, acknowledged, duplicate, superseded).",
    ["outcome"],
)
DRAFT_SECONDS = Histogram(
    "desk_drafter_run_seconds",
    "Time from taking an event or decision to the item being published.",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
TOKENS = Counter("desk_drafter_tokens_total", "Model tokens, by kind.", ["kind"])
COST = Counter("desk_drafter_cost_usd_total", "Estimated model cost in USD.")

# Every series known up front exists at 0 from the start (see shared.metrics).
for _category in CATEGORIES:
    for _kind in ("draft", "redraft"):
        DRAFTS.labels(_category, _kind)
DRAFTS.labels(ESCALATION, "notify")
for _kind in ("input", "output"):
    TOKENS.labels(_kind)

# the model's own concurrency (services/drafter/limiter.py)
LLM_LIMIT = Gauge(
    "desk_drafter_llm_concurrency_limit",
    "Model calls this drafter may have in flight now (DESK_LLM_CONCURRENCY, halved on a 429).",
)
LLM_IN_FLIGHT = Gauge("desk_drafter_llm_in_flight", "Model calls in flight now.")
LLM_OVERLOADED = Counter(
    "desk_drafter_llm_overloaded_total",
    "Times the model endpoint answered 429 and the concurrency limit was halved.",
)

# bounded state (services/drafter/retention.py)
THREADS_PRUNED = Counter(
    "desk_drafter_threads_pruned_total",
    "Finished threads deleted from the checkpoints after DESK_THREAD_RETENTION_DAYS.",
)

# the model endpoint's health (services/drafter/health.py)
MODEL_UP = Gauge(
    "desk_model_up",
    "1 while the model endpoint answers, 0 while it counts as down (tickets wait for it).",
)
MODEL_UP.set(1)
MODEL_FAILURES = Counter(
    "desk_model_failures_total",
    "Failed model calls, by what failed (unreachable, timeout, server, overloaded, refused).",
    ["kind"],
)
for _kind in ("unreachable", "timeout", "server", "overloaded", "refused"):
    MODEL_FAILURES.labels(_kind)
NO_DRAFT = Counter(
    "desk_drafter_no_draft_total",
    "Tickets sent to the inbox without a draft because the model failed on them.",
)
