"""The report: one PASS/FAIL line per invariant, then an INFO line of counts."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

from shared.inbox import CATEGORIES

from ..harness.stack import SERVICES, is_service, service_pid
from .campaign import SOURCES, Campaign
from .claims import Claims
from .observation import logged_errors, readiness
from .prompts import PromptGroup
from .tally import InsiderRun, total


def report(
    c: Campaign,
    var: Path,
    state: dict[str, Any],
    supervisor_alive: bool,
    pids: dict[str, int | None],
    same_broker: bool,
    before: dict[str, int],
    after_ingress: dict[str, int],
    after: dict[str, int],
    decisions_seen: bool,
    quiet: bool,
    started: float,
    insiders: InsiderRun | None = None,
    prompts: PromptGroup | None = None,
    claims: Claims | None = None,
) -> bool:
    t = c.tally
    lines: list[tuple[bool, str, str]] = []
    if insiders is not None:
        print_insider_table(insiders)
        lines += insider_lines(insiders)

    lines.append(
        (
            not t.server_errors,
            "no 5xx",
            f"{len(t.server_errors)} server errors or dropped connections in "
            f"{sum(t.tried.values())} requests"
            f"{': ' + ' | '.join(t.server_errors[:5]) if t.server_errors else ''}",
        )
    )

    now = {name: service_pid(var, name) for name in SERVICES}
    changed = [
        f"{n} {pids[n]}->{now[n]}"
        for n in SERVICES
        if not pids[n] or now[n] != pids[n] or not is_service(pids[n] or 0, n)
    ]
    ready = readiness(state)
    not_ready = {n: s for n, s in ready.items() if s != 200}
    lines.append(
        (
            supervisor_alive and same_broker and not changed and not not_ready,
            "no crashed process",
            f"services with the same pid as at the start {len(SERVICES) - len(changed)}/"
            f"{len(SERVICES)}{' (changed ' + ', '.join(changed) + ')' if changed else ''}; "
            f"/readyz 200 {len(ready) - len(not_ready)}/{len(ready)}"
            f"{' ' + str(not_ready) if not_ready else ''}; nats-server same pid {same_broker}; "
            f"supervisor alive {supervisor_alive}",
        )
    )

    lines.append(
        (
            not t.forgeries,
            "no accepted forgery",
            f"{len(t.forgeries)} accepted of {t.tried['ingress/forged']} forged and "
            f"{t.tried['ingress/arbitrary']} unsigned/garbage-signed ingress requests and "
            f"{sum(n for g, n in t.tried.items() if g.endswith(('/none', '/wrong', '/viewer')))} "
            f"inbox requests with no token, a wrong one or a viewer's"
            f"{': ' + ' | '.join(t.forgeries[:5]) if t.forgeries else ''}",
        )
    )

    new_events = sum(after_ingress[s] - before[s] for s in SOURCES)
    late_events = sum(after[s] - after_ingress[s] for s in SOURCES)
    new_decisions = after["decisions"] - before["decisions"]
    new_auto = after.get("auto_decisions", 0) - before.get("auto_decisions", 0)
    rejected = total(t, "ingress") - t.accepted_new - t.duplicates
    lines.append(
        (
            new_events == t.accepted_new
            and t.accepted_new > 0
            and new_decisions == t.decisions + new_auto
            and decisions_seen,
            "no event from a rejected request",
            f"EVENTS from ingress sources +{new_events} = control events answered 202 as new "
            f"{t.accepted_new} (duplicates answered {t.duplicates}, rejected requests {rejected}; "
            f"+{late_events} during the inbox phase, i.e. dead-letter replays); decisions "
            f"+{new_decisions} = decisions answered 202 {t.decisions} + auto-send's {new_auto}",
        )
    )

    lines.append(
        (
            not t.unexpected and not t.own_errors,
            "contract",
            f"{len(t.unexpected)} answers other than the group's contract"
            f"{': ' + ' | '.join(t.unexpected[:5]) if t.unexpected else ''}; "
            f"campaign errors {len(t.own_errors)}"
            f"{': ' + ' | '.join(t.own_errors[:3]) if t.own_errors else ''}",
        )
    )

    if prompts is not None:
        lines += prompt_lines(prompts)
    if claims is not None:
        lines += claim_lines(claims)

    errors, samples = logged_errors(var)
    lines.append(
        (
            not errors and quiet,
            "no failure inside a service",
            f"error log lines {dict(errors) or 0}"
            f"{': ' + ' | '.join(samples) if samples else ''}; every consumer drained "
            f"afterwards (nothing pending or unacknowledged) {quiet}",
        )
    )

    for good, name, text in lines:
        print(f"{'PASS' if good else 'FAIL'} {name}: {c.redact(text)}", flush=True)
    if insiders is not None:
        print_insider_notes(insiders)
    per_group = "; ".join(
        f"{g} {t.tried[g]} {dict(sorted(t.classes.get(g, Counter()).items()))}"
        for g in sorted(t.tried)
    )
    print(
        f"INFO counts: inputs tried {sum(t.tried.values())} (ingress {total(t, 'ingress')}, "
        f"inbox API {total(t, 'inbox')}); {per_group}; refused by our own client "
        f"{t.unsendable}; wall time {time.monotonic() - started:.0f}s",
        flush=True,
    )
    return all(good for good, _, _ in lines)


def prompt_lines(group: PromptGroup) -> list[tuple[bool, str, str]]:
    """The prompt-level group's verdicts: every hostile ticket drafted, nobody else's data in a
    prompt or a draft."""
    return [
        (
            bool(group.tickets) and bool(group.seeded) and not group.lost,
            "every prompt-level input drafted",
            f"{len(group.tickets) - len(group.lost)}/{len(group.tickets)} hostile tickets in the "
            f"inbox after {len(group.seeded)} customers' rounds were approved"
            f"{': ' + ' | '.join(group.lost[:5]) if group.lost else ''}",
        ),
        (
            bool(group.tickets) and not group.leaks,
            "no other customer's data in a prompt or draft",
            f"{len(group.leaks)} times another customer's e-mail, phone, order number or name "
            f"in what the model was shown or wrote, over {len(group.llm.requests)} prompts"
            f"{': ' + ' | '.join(group.leaks[:6]) if group.leaks else ''}",
        ),
        (
            bool(group.tickets) and not group.refused and not group.unapproved,
            "no hostile draft auto-sent",
            f"{len(group.unapproved)} of {len(group.tickets)} hostile drafts sent without a "
            f"person, auto-send on for {len(group.autosend)}/{len(CATEGORIES)} categories and "
            "no routing rule giving a category"
            f"{': refused ' + ' | '.join(group.refused[:3]) if group.refused else ''}"
            f"{': ' + ' | '.join(group.unapproved[:6]) if group.unapproved else ''}",
        ),
    ]


def claim_lines(claims: Claims) -> list[tuple[bool, str, str]]:
    """The claims group's verdict: nothing that claimed another identity was believed."""
    wrong = [*claims.believed, *claims.letters, *claims.decisions]
    return [
        (
            not claims.error and bool(claims.items) and not wrong,
            "no claimed identity believed",
            f"{len({b.split()[0] for b in claims.believed})} of {len(claims.items)} items "
            f"forged with the drafter's credentials decided or sent; the drafter's dead letter "
            f"claiming the sender's: "
            f"{'; '.join(claims.letters) or 'listed as the drafter, replay refused'}; "
            f"decisions recorded as the reviewer they named {len(claims.decisions)}"
            f"{': ' + claims.error if claims.error else ''}"
            f"{': ' + ' | '.join(wrong[:6]) if wrong else ''}",
        )
    ]


def print_insider_table(run: InsiderRun) -> None:
    """One row per NATS user: what it tried outside its declaration, and its controls."""
    print(
        f"INSIDER {'user':<14} {'probes':>6} {'accepted':>8} {'refused':>7} {'controls':>8} "
        f"{'configs':>7}  (configs: accepted/tried, known gaps)",
        flush=True,
    )
    for u in run.users:
        controls = f"{u.controls - len(u.controls_refused)}/{u.controls}"
        configs = f"{len(u.configs_accepted)}/{u.configs}"
        print(
            f"INSIDER {u.user:<14} {u.probes:>6} {len(u.accepted):>8} {u.refused:>7} "
            f"{controls:>8} {configs:>7}",
            flush=True,
        )


def insider_lines(run: InsiderRun) -> list[tuple[bool, str, str]]:
    """The insider group's verdicts: nothing outside a declaration accepted; every control
    granted and every violation accounted for."""
    if run.error:
        return [(False, "no accepted insider operation", f"the group did not run: {run.error}")]
    accepted = [a for u in run.users for a in u.accepted]
    probes = sum(u.probes for u in run.users)
    refused = sum(u.refused for u in run.users)
    unprobed = [u.user for u in run.users if not u.probes or not u.controls]
    controls = sum(u.controls for u in run.users)
    denied = [d for u in run.users for d in u.controls_refused]
    strays = [s for u in run.users for s in u.strays]
    return [
        (
            not accepted and not unprobed and bool(run.users),
            "no accepted insider operation",
            f"{len(accepted)} accepted, {refused} refused of {probes} publishes and "
            f"subscriptions outside their declarations by {len(run.users)} users"
            f"{' (no probes or controls for ' + ', '.join(unprobed) + ')' if unprobed else ''}"
            f"{': ' + ' | '.join(accepted[:8]) if accepted else ''}",
        ),
        (
            not denied and not strays,
            "insider controls granted",
            f"{controls - len(denied)}/{controls} declared operations granted"
            f"{': refused ' + ' | '.join(denied[:8]) if denied else ''}; "
            f"errors belonging to no probe {len(strays)}"
            f"{': ' + ' | '.join(strays[:5]) if strays else ''}; {run.seconds:.1f}s",
        ),
    ]


def print_insider_notes(run: InsiderRun) -> None:
    """Known gaps (subject permissions cannot see inside a request) and shared publishers."""
    from .insiders import KNOWN_GAPS

    gaps = [g for u in run.users for g in u.configs_accepted]
    tried = sum(u.configs for u in run.users)
    if gaps:
        print(
            f"FAIL {len(gaps)} of {tried} consumer configs outside the declared "
            f"filters accepted on a create subject ({'; '.join(KNOWN_GAPS.values())}): "
            f"{' | '.join(gaps)}",
            flush=True,
        )
    elif tried:
        print(f"INFO consumer configs: 0 of {tried} create requests accepted", flush=True)
    shared = {s: users for s, users in run.publishers.items() if len(users) > 1}
    if shared:
        print(
            "INFO subjects more than one user may publish (declared): "
            + "; ".join(f"{s} {','.join(users)}" for s, users in shared.items()),
            flush=True,
        )


def report_insiders(run: InsiderRun) -> bool:
    """The insider group alone (`--only insiders`): its table, verdicts and notes."""
    print_insider_table(run)
    lines = insider_lines(run)
    for good, name, text in lines:
        print(f"{'PASS' if good else 'FAIL'} {name}: {text}", flush=True)
    print_insider_notes(run)
    return run.ok and all(good for good, _, _ in lines)
