"""A case's outcome: what its draft did, and what failed with an excerpt that shows it."""

from __future__ import annotations

from dataclasses import dataclass, field

from shared import evidence

from .criteria import gist, said_where


@dataclass
class Outcome:
    id: str
    category: str  # expected
    articles: list[str] | None = None  # expected ([]: no article applies; None: not known)
    drafted_category: str | None = None
    reply: str = ""
    retrieved: list[str] = field(default_factory=list)
    cited: list[str] = field(default_factory=list)
    quoted: list[str] = field(default_factory=list)  # articles whose passages the reply repeats
    quotations: dict[str, str] = field(default_factory=dict)  # article: what it repeats
    missing: list[str] = field(default_factory=list)  # `must` not met
    said: list[str] = field(default_factory=list)  # `must_not` said
    criteria: int = 0
    criteria_met: int = 0
    retrieval_hit: bool | None = None  # None: the case expects no article
    similarity: float | None = None  # to the reference, when the case has one
    warnings: list[str] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    usd: float = 0.0
    error: str | None = None

    @property
    def category_ok(self) -> bool:
        return self.drafted_category == self.category

    @property
    def wrong_articles(self) -> list[str]:
        return evidence.wrong_articles(self.articles, self.cited, self.quoted)

    @property
    def ok(self) -> bool:
        return not self.failures()

    def failures(self) -> list[tuple[str, str]]:
        """What failed, each with an excerpt of the reply that shows it."""
        if self.error is not None:
            return [(self.error, "")]
        found = []
        if not self.category_ok:
            found.append((f"category {self.drafted_category} (expected {self.category})", ""))
        for wrong in self.wrong_articles:
            named = wrong.replace(",", " ").split()
            shown = [q for a, q in self.quotations.items() if a in named]
            found.append((wrong, shown[0] if shown else gist(self.reply)))
        found += [(f"missing {c!r}", gist(self.reply)) for c in self.missing]
        found += [(f"said {c!r}", said_where(c, self.reply) or "") for c in self.said]
        return found
