"""The inbox API part of the campaign: schemathesis cases from its /openapi.json, sent as
reviewer, as viewer, without a token and with a wrong one; then decisions on the real
waiting items."""

from __future__ import annotations

import time
from typing import Any

import httpx
from hypothesis import strategies as st

from ..facts import log
from .campaign import DEMO_TICKETS, Campaign
from .strategies import run_examples

# the reviewer twice: it reaches the most code (and negative cases often drop the token)
AUTH_MODES = ("reviewer", "reviewer", "viewer", "none", "wrong")
DECIDING = ("POST",)  # operations a viewer may not perform (all POSTs of the API)


def wrong_tokens(reviewer: str) -> st.SearchStrategy[str]:
    """Authorization values that must not authenticate (never the real token as a bearer)."""
    printable = st.text(
        st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=60
    )
    return st.one_of(
        printable.map(lambda t: f"Bearer {t}").filter(lambda v: v != f"Bearer {reviewer}"),
        printable.map(lambda t: f"Bearer {reviewer}{t}"),
        printable.map(lambda t: f"Bearer {t}{reviewer}"),
        st.integers(0, max(len(reviewer) - 1, 0)).map(
            lambda i: f"Bearer {reviewer[:i]}{chr(ord(reviewer[i]) ^ 1)}{reviewer[i + 1 :]}"
        ),
        st.sampled_from(
            [f"Basic {reviewer}", f"Token {reviewer}", reviewer, "Bearer", f"Bearer{reviewer}"]
        ),
    )


def inbox_campaign(c: Campaign, examples: int) -> None:
    import requests
    import schemathesis
    from schemathesis.core.result import Ok
    from schemathesis.generation import GenerationMode

    t = c.tally
    schema = schemathesis.openapi.from_url(f"{c.inbox}/openapi.json")
    schema.config.update(base_url=c.inbox)
    operations = [r.ok() for r in schema.get_all_operations() if isinstance(r, Ok)]
    session = requests.Session()
    per_operation = max(examples // 4, 10)

    def call(case: Any, mode: str, header: str | None, group: str) -> None:
        headers = {"Authorization": header} if header is not None else {}
        if case.headers:
            case.headers = {k: v for k, v in case.headers.items() if k.lower() != "authorization"}
        what = f"{group} {mode}: {case.method} {case.path}"
        try:
            answer = case.call(session=session, headers=headers, timeout=15)
        except (requests.exceptions.InvalidHeader, requests.exceptions.InvalidURL, ValueError):
            t.unsendable += 1
            return
        except requests.exceptions.RequestException as exc:
            t.dropped(group, what, exc)
            return
        sent = answer.request.headers.get("Authorization")
        if sent != header:  # a negative case replaced or removed our token: judge what was sent
            mode = "none" if sent is None else "wrong"
            what = f"{group} {mode} (by schemathesis): {case.method} {case.path}"
        status = answer.status_code
        t.answered(f"{group}/{mode}", status)
        if status >= 500:
            t.server_errors.append(f"{what} -> {status} {answer.text[:120]}")
            return
        deciding = case.method.upper() in DECIDING
        if mode in ("none", "wrong") and status != 401:
            (t.forgeries if status < 300 else t.unexpected).append(f"{what} -> {status}")
        elif mode == "viewer" and deciding and status != 403:
            (t.forgeries if status < 300 else t.unexpected).append(f"{what} -> {status}")
        if status == 202 and case.path.endswith("/decision"):
            t.decided.add(str(answer.json().get("item_id")))

    fixed: dict[str, st.SearchStrategy[str | None]] = {
        "reviewer": st.just(f"Bearer {c.reviewer}"),
        "viewer": st.just(f"Bearer {c.viewer}"),
        "none": st.none(),
        "wrong": wrong_tokens(c.reviewer),
    }
    modes_with_token = st.sampled_from(AUTH_MODES).flatmap(
        lambda mode: fixed[mode].map(lambda header: (mode, header))
    )
    for offset, op in enumerate(operations):
        started = time.monotonic()
        before = t.tried.copy()
        cases = st.one_of(
            op.as_strategy(GenerationMode.POSITIVE), op.as_strategy(GenerationMode.NEGATIVE)
        )
        strategy = st.tuples(cases, modes_with_token)
        run_examples(
            strategy,
            per_operation,
            c.seed + 100 + offset,
            lambda pair: call(pair[0], pair[1][0], pair[1][1], "inbox"),
            t,
            f"inbox {op.method.upper()} {op.path}",
        )
        sent = sum((t.tried - before).values())
        log(
            f"inbox {op.method.upper()} {op.path}: {sent} requests "
            f"in {time.monotonic() - started:.1f}s"
        )

    # decisions on the real waiting items (random ids almost never hit one)
    items = waiting_items(c)
    decision = next(op for op in operations if op.path.endswith("/decision"))
    started = time.monotonic()
    cases = st.sampled_from(items).flatmap(
        lambda item: st.one_of(
            decision.as_strategy(GenerationMode.POSITIVE, path_parameters={"id": item}),
            decision.as_strategy(GenerationMode.NEGATIVE, path_parameters={"id": item}),
        )
    )
    run_examples(
        cases,
        max(examples // 2, 20),
        c.seed + 200,
        lambda case: call(case, "reviewer", f"Bearer {c.reviewer}", "inbox-decisions"),
        t,
        "inbox decisions",
    )
    log(
        f"inbox decisions on {len(items)} real items: {t.tried['inbox-decisions/reviewer']} "
        f"requests in {time.monotonic() - started:.1f}s"
    )


def waiting_items(c: Campaign, timeout: float = 120) -> list[str]:
    deadline = time.monotonic() + timeout
    with httpx.Client(base_url=c.inbox, timeout=10) as client:
        while True:
            answer = client.get(
                "/api/items",
                params={"status": "waiting", "limit": "200"},
                headers={"Authorization": f"Bearer {c.reviewer}"},
            )
            if answer.status_code == 200:
                found = [i["id"] for i in answer.json()["items"]]
                if len(found) >= len(DEMO_TICKETS) or (found and time.monotonic() > deadline):
                    return found
            if time.monotonic() > deadline:
                raise RuntimeError(f"no waiting inbox item within {timeout:.0f}s")
            time.sleep(0.5)
