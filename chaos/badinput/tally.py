"""What the campaign saw: answers per input group, and every answer that broke a rule."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class Tally:
    tried: Counter[str] = field(default_factory=Counter)  # group -> requests answered
    classes: dict[str, Counter[str]] = field(default_factory=dict)  # group -> "2xx": n, …
    server_errors: list[str] = field(default_factory=list)  # 5xx or a dropped connection
    forgeries: list[str] = field(default_factory=list)  # accepted without proof
    unexpected: list[str] = field(default_factory=list)  # a 4xx/2xx the contract does not say
    unsendable: int = 0  # refused by our own HTTP client (not a request at all)
    accepted_new: int = 0  # ingress 202 duplicate:false
    duplicates: int = 0  # ingress 202 duplicate:true
    decisions: int = 0  # inbox decisions answered 202
    own_errors: list[str] = field(default_factory=list)  # bugs in this campaign, not the product

    def answered(self, group: str, status: int) -> None:
        self.tried[group] += 1
        self.classes.setdefault(group, Counter())[f"{status // 100}xx"] += 1

    def dropped(self, group: str, what: str, exc: Exception) -> None:
        self.tried[group] += 1
        self.classes.setdefault(group, Counter())["dropped"] += 1
        self.server_errors.append(f"{group} {what}: no answer ({exc.__class__.__name__})")


def total(tally: Tally, prefix: str) -> int:
    return sum(n for g, n in tally.tried.items() if g.startswith(prefix))
