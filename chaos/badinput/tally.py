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
    # items whose decision was answered 202: a decision posted again as it was recorded is
    # answered 202 too, with the recorded one, and publishes nothing new
    decided: set[str] = field(default_factory=set)
    own_errors: list[str] = field(default_factory=list)  # bugs in this campaign, not the product

    @property
    def decisions(self) -> int:
        """Decisions the inbox took (one an item at most)."""
        return len(self.decided)

    def answered(self, group: str, status: int) -> None:
        self.tried[group] += 1
        self.classes.setdefault(group, Counter())[f"{status // 100}xx"] += 1

    def dropped(self, group: str, what: str, exc: Exception) -> None:
        self.tried[group] += 1
        self.classes.setdefault(group, Counter())["dropped"] += 1
        self.server_errors.append(f"{group} {what}: no answer ({exc.__class__.__name__})")


def total(tally: Tally, prefix: str) -> int:
    return sum(n for g, n in tally.tried.items() if g.startswith(prefix))


@dataclass
class InsiderTally:
    """What one NATS user (a service or role) was refused and granted in the insider group."""

    user: str
    probes: int = 0  # publishes and subscriptions outside its declared needs
    refused: int = 0  # … that the server answered with a permissions violation
    accepted: list[str] = field(default_factory=list)  # … that it did not (must stay empty)
    controls: int = 0  # operations it IS granted, tried the same way
    controls_refused: list[str] = field(default_factory=list)  # must stay empty
    configs: int = 0  # consumer configs outside its declared filters, on a granted subject
    configs_accepted: list[str] = field(default_factory=list)  # consumer configs (must stay empty)
    strays: list[str] = field(default_factory=list)  # errors that belong to no probe at hand


@dataclass
class InsiderRun:
    """The insider group's result: one tally per user, and who may publish what."""

    users: list[InsiderTally] = field(default_factory=list)
    publishers: dict[str, list[str]] = field(default_factory=dict)  # data subject -> users
    seconds: float = 0.0
    error: str = ""  # the group could not run at all

    @property
    def accepted(self) -> int:
        return sum(len(u.accepted) for u in self.users)

    @property
    def ok(self) -> bool:
        """Nothing outside a declaration accepted, every control granted, the probe mechanism
        sound (no stray errors), and every user probed. Known gaps only warn."""
        return (
            not self.error
            and bool(self.users)
            and all(u.probes > 0 and u.controls > 0 for u in self.users)
            and not any(
                u.accepted or u.configs_accepted or u.controls_refused or u.strays
                for u in self.users
            )
        )
