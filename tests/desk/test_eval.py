"""`desk eval` as a user runs it: the demo set through the built-in model, a set through a real
OpenAI-compatible HTTP server (FakeLLM) whose answers follow the system prompt it is sent, the
errors a bad case file or prompt gets, and the scoring rules (a draft that cites or quotes an
article where none applies fails; `must` and `must_not` are read in the reply)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from desk.evaluation import (
    DEMO_CASES,
    MONEY,
    Case,
    CaseFile,
    Outcome,
    candidate,
    load,
    met,
    quotations,
    render,
    run,
)
from desk.helpdesk import DEMO_KNOWLEDGE
from services.drafter.knowledge import Knowledge
from shared import evidence
from standins.llm import FakeLLM, default_responder
from tests import forkserver

DESK = [sys.executable, "-m", "desk"]
QUOTE = "Quote the policy you were given, word for word."
CASES: dict[str, Any] = {
    "version": 3,
    "name": "two",
    "cases": [
        {
            "id": "refund-slow",
            "subject": "Refund not here",
            "customer": "Mia",
            "messages": [
                {"from": "customer", "text": "You confirmed my refund. When is the money back?"}
            ],
            "category": "refund",
            "articles": ["refunds"],
            "must": ["5 business days | five business days"],
            "must_not": ["re:(\\$|€|£)\\s?\\d"],
        },
        {
            "id": "charged-twice",
            "subject": "Charged twice",
            "messages": [
                {"from": "customer", "text": "I was charged twice this month."},
                {"from": "agent", "text": "Sorry! On which dates?"},
                {"from": "customer", "text": "Both on the 3rd, for my subscription."},
            ],
            "category": "billing",
            "articles": ["duplicate-charges"],
            "must": ["re:pending|authori[sz]ation"],
        },
    ],
}


def desk(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DESK_", "LLM_"))}
    return forkserver.run(["eval", *args], env={**clean, **(env or {})}, timeout=120)


def test_the_demo_set_runs_through_the_built_in_model_and_passes(tmp_path: Path) -> None:
    cases = load(DEMO_CASES)
    assert len(cases.cases) >= 40
    report = tmp_path / "report.json"
    report.touch(mode=0o644)  # an older report, readable by everyone
    report.chmod(0o644)
    run = desk("--json", str(report), env={"DESK_VAR_DIR": str(tmp_path / "var")})
    assert run.returncode == 0, run.stdout + run.stderr
    assert stat.S_IMODE(report.stat().st_mode) == 0o600  # it quotes tickets: its owner's only
    assert run.stderr == ""
    assert f"eval demo v{cases.version} · {len(cases.cases)} cases" in run.stdout
    assert "model offline (built-in) · prompt built-in" in run.stdout
    assert "passed: yes" in run.stdout
    data = json.loads(report.read_text())
    assert data["passed"] is True
    # no off-topic policy: no draft cites or quotes an article where none applies
    assert data["overall"]["wrong_articles"] == 0
    assert data["overall"]["cases"] == len(cases.cases)
    # the relevance floor offers nothing rather than an off-topic passage: it gives up recall
    # (64 % of the cases an article applies to, `python -m benchmarks.retrieval`), not precision
    assert data["overall"]["retrieval_hit_rate"] >= 0.6
    assert set(data["by_category"]) >= {"refund", "billing", "invoice", "account"}
    # what the inbox is sent to enable auto-send: the case file named by its sha256, and case
    # results the verdict is worked out from again (`shared.evidence`), agreeing with this run
    assert data["cases_file"]["sha256"] == hashlib.sha256(DEMO_CASES.read_bytes()).hexdigest()
    shown = evidence.check(data, "invoice")
    assert shown["overall"]["cases"] == len(cases.cases)
    assert shown["overall"]["category_accuracy"] == data["overall"]["category_accuracy"]
    assert shown["overall"]["criteria_met"] == data["overall"]["criteria_met"]


def test_every_expected_article_exists_and_every_must_is_in_its_articles() -> None:
    """The demo set checks facts the knowledge base states: a case cannot ask for one it
    does not (a typo in a case would make every model fail it)."""
    knowledge = Knowledge(DEMO_KNOWLEDGE)
    articles = knowledge.articles()
    text = {a: " ".join(p.text for p in knowledge.passages if p.article == a) for a in articles}
    for case in load(DEMO_CASES).cases:
        assert case.articles is not None, case.id  # [] when no article applies
        assert set(case.articles) <= articles, case.id
        for criterion in case.must if case.articles else []:
            if not criterion.startswith("re:"):
                assert any(met(criterion, text[a]) for a in case.articles), (case.id, criterion)


def policy_follower(body: dict[str, Any]) -> dict[str, Any]:
    """An endpoint whose model does what its system prompt says: told to quote the policy, it
    replies with the passages it was given; otherwise with a polite note."""
    answer = default_responder(body)
    system = body["messages"][0]["content"]
    user = body["messages"][-1]["content"]
    category = "billing" if "charged twice" in user.lower() else "refund"
    reply = "Hello, thank you for writing. We are looking into it. The Support Team"
    if QUOTE in system and "<knowledge>" in user:
        given = json.loads(user.split("<knowledge>\n", 1)[1].split("\n</knowledge>", 1)[0])
        reply = "Hello, " + " ".join(p["text"] for p in given) + " The Support Team"
        answer["sources"] = [given[0]["article"]]
    else:
        answer["sources"] = []
    return {**answer, "category": category, "reply": reply}


def test_a_changed_prompt_changes_the_numbers(tmp_path: Path) -> None:
    cases = tmp_path / "cases.yaml"
    cases.write_text(yaml.safe_dump(CASES))
    prompt = tmp_path / "quote.txt"
    prompt.write_text(QUOTE + "\n")
    with FakeLLM() as llm:
        llm.responder = policy_follower
        env = {
            "DESK_LLM_BASE_URL": llm.url,
            "DESK_LLM_API_KEY": "k",
            "DESK_LLM_PRICE_INPUT": "1",
            "DESK_LLM_PRICE_OUTPUT": "2",
            "DESK_VAR_DIR": str(tmp_path / "var"),
        }
        common = ["--cases", str(cases), "--knowledge", str(DEMO_KNOWLEDGE), "--json", "-"]
        before = desk(*common, "--model", "candidate-1", env=env)
        after = desk(*common, "--prompt", str(prompt), env=env)
        systems = [r["messages"][0]["content"] for r in llm.requests]
        models = [r["model"] for r in llm.requests]
    assert before.returncode == 1, before.stderr  # criteria missed: the run does not pass
    assert after.returncode == 0, after.stderr
    old, new = json.loads(before.stdout), json.loads(after.stdout)
    assert (old["model"], new["prompt"]) == ("candidate-1", "quote.txt")
    assert "candidate-1" in models
    assert QUOTE in systems and any(QUOTE not in s for s in systems)
    assert old["overall"]["criteria_met"] < new["overall"]["criteria_met"] == 1.0
    assert old["overall"]["category_accuracy"] == new["overall"]["category_accuracy"] == 1.0
    assert new["overall"]["retrieval_hit_rate"] == 1.0
    assert new["overall"]["input_tokens"] > 0 and new["overall"]["usd"] > 0
    [missed] = [c for c in old["cases"] if c["id"] == "refund-slow"]
    assert missed["missing"] == ["5 business days | five business days"]


def test_a_bad_case_file_or_prompt_gets_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**CASES, "cases": [{**CASES["cases"][0], "category": "x"}]}))
    run = desk("--cases", str(bad), env={"DESK_VAR_DIR": str(tmp_path)})
    assert run.returncode == 2
    assert "cases.0.category" in run.stderr and "Traceback" not in run.stderr
    twice = tmp_path / "twice.yaml"
    twice.write_text(yaml.safe_dump({**CASES, "cases": [CASES["cases"][0]] * 2}))
    run = desk("--cases", str(twice), env={"DESK_VAR_DIR": str(tmp_path)})
    assert (run.returncode, run.stderr.strip()) == (
        2,
        f"desk eval: {twice}: two cases have the id 'refund-slow'",
    )
    run = desk("--prompt", str(tmp_path / "missing.txt"), env={"DESK_VAR_DIR": str(tmp_path)})
    assert run.returncode == 2 and "cannot read the prompt" in run.stderr
    run = desk("--cases", str(tmp_path / "nope.yaml"), env={"DESK_VAR_DIR": str(tmp_path)})
    assert run.returncode == 2 and "cannot read" in run.stderr and "Traceback" not in run.stderr


def test_the_round_is_what_the_customer_wrote_after_the_last_agent_message() -> None:
    case = Case.model_validate(CASES["cases"][1])
    ticket, round_ = case.ticket()
    assert round_["messages"] == ["charged-twice-m3"]
    assert [m["author"] for m in ticket["messages"]] == ["customer", "agent", "customer"]
    assert met("re:pending|authori[sz]ation", "It is an Authorisation hold")
    assert met("5 business days | five business days", "within five  business days.")
    assert not met("5 business days", "within 5 days")


# -- the scoring rules ------------------------------------------------------------------------

# desk/knowledge/refunds.md, word for word: the policy the review found pasted into bug reports
REFUND_POLICY = (
    "We refund a payment in full when it was taken by mistake, when an item arrived damaged or "
    "never arrived"
)
LOOKING = "Hi Ali,\n\nThank you. Our engineers are looking into it.\n\nThe Support Team"
SIGNED = "Thank you. Our engineers are looking into it. The Support Team"


def outcome(**given: Any) -> Outcome:
    defaults: dict[str, Any] = {
        "id": "c1",
        "category": "bug",
        "articles": [],
        "drafted_category": "bug",
        "reply": LOOKING,
    }
    return Outcome(**{**defaults, **given})


def test_a_case_expecting_no_article_fails_when_its_draft_cites_one() -> None:
    assert outcome().ok and outcome().failures() == []
    cited = outcome(cited=["refunds"])
    assert not cited.ok
    assert cited.failures() == [  # with the start of the reply after its greeting
        ("cites refunds, where no article applies", SIGNED)
    ]
    # a case that expects articles may cite them (and others besides); relying only on others
    # is the same off-topic policy
    assert outcome(articles=["refunds"], cited=["refunds", "shipping"]).ok
    [(what, _)] = outcome(articles=["invoices"], cited=["exports"]).failures()
    assert what == "relies on exports, not on invoices"
    # a case from the review log does not know which articles apply: no verdict on them
    assert outcome(articles=None, cited=["refunds"], quoted=["shipping"]).ok


def test_a_passage_quoted_without_citing_it_fails_a_case_expecting_no_article() -> None:
    passages = Knowledge(DEMO_KNOWLEDGE).passages
    reply = f"Hi Ali,\n\nThanks for the report. {REFUND_POLICY}.\n\nThe Support Team"
    found = quotations(reply, passages)
    assert found == {"refunds": REFUND_POLICY[:89] + "…"}  # the words repeated, cut short
    quoted = outcome(reply=reply, quoted=list(found), quotations=found)
    assert quoted.failures() == [
        ("quotes refunds without citing it, where no article applies", found["refunds"])
    ]
    # case, punctuation and line breaks aside; eight words in a row make a quotation, seven not
    assert list(quotations("we REFUND a payment,\nin full, when it", passages)) == ["refunds"]
    assert quotations("We refund a payment in full when", passages) == {}
    assert quotations(LOOKING, passages) == {}
    # a case that expects the article may quote it
    assert outcome(articles=["refunds"], reply=reply, quoted=["refunds"], quotations=found).ok


def test_a_run_names_each_failure_and_does_not_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Drafted through a real model endpoint: a draft pasting the refund policy into a bug report
    (uncited), one citing it, a refund reply missing its fact and naming a sum, and a clean one;
    the report, the table and the inbox's evidence agree on what failed."""

    def said(subject: str, must: tuple[str, ...] = (), articles: tuple[str, ...] = ()) -> Any:
        text = f"{subject}: please help."
        return {"id": subject.split()[0].lower(), "subject": subject, "category": "bug",
                "messages": [{"from": "customer", "text": text}], "articles": list(articles),
                "must": list(must), "must_not": [MONEY]}  # fmt: skip

    cases = CaseFile.model_validate(
        {
            "version": 1,
            "name": "rules",
            "cases": [
                said("Photo upload crashes"),
                said("Webhook stopped"),
                {**said("Refund slow", ("5 business days",), ("refunds",)), "category": "refund"},
                said("Calendar broken", ("re:look(ing)? into",)),
            ],
        }
    )
    cases.sha256 = "ab" * 32
    replies = {
        "Photo upload crashes": (f"Hi, {REFUND_POLICY}. The Support Team", [], "bug"),
        "Webhook stopped": ("Hi, we are looking into it. The Support Team", ["refunds"], "bug"),
        "Refund slow": ("Hi, your refund of $5 is on its way. The Support Team", [], "refund"),
        "Calendar broken": ("Hi, we are looking into it. The Support Team", [], "bug"),
    }

    def responder(body: dict[str, Any]) -> dict[str, Any]:
        user = body["messages"][-1]["content"]
        [(reply, sources, category)] = [r for s, r in replies.items() if s in user]
        return {**default_responder(body), "reply": reply, "sources": sources,
                "category": category}  # fmt: skip

    for name in [k for k in os.environ if k.startswith(("DESK_", "LLM_"))]:
        monkeypatch.delenv(name)
    with FakeLLM() as llm:
        llm.responder = responder
        monkeypatch.setenv("DESK_LLM_BASE_URL", llm.url)
        monkeypatch.setenv("DESK_LLM_API_KEY", "k")
        monkeypatch.setenv("DESK_VAR_DIR", str(tmp_path))
        report = asyncio.run(run(cases, candidate(None, DEMO_KNOWLEDGE), "Draft.", "rules"))
    data = report.as_json()
    ok = {c["id"]: c["ok"] for c in data["cases"]}
    assert ok == {"photo": False, "webhook": False, "refund": False, "calendar": True}
    failures = {c["id"]: c["failures"] for c in data["cases"]}
    assert failures["photo"] == [
        {
            "what": "quotes refunds without citing it, where no article applies",
            "excerpt": REFUND_POLICY[:89] + "…",
        }
    ]
    assert [f["what"] for f in failures["webhook"]] == ["cites refunds, where no article applies"]
    assert failures["refund"] == [
        {"what": "missing '5 business days'", "excerpt": "Hi, your refund of $5 is on its way. "
         "The Support Team"},
        {"what": f"said {MONEY!r}", "excerpt": "Hi, your refund of $5 is on its way. The Support…"},
    ]  # fmt: skip
    overall = data["overall"]
    assert (overall["wrong_articles"], overall["must_not_said"]) == (2, 1)
    assert (overall["cases_ok"], data["passed"]) == (0.25, False)
    table = render(report)
    assert (
        "  photo: quotes refunds without citing it, where no article applies — “We refund" in table
    )
    assert "  webhook: cites refunds, where no article applies" in table
    assert "  refund: missing '5 business days' — “Hi, your refund of $5" in table
    assert "wrong article: 2" in table and "passed: no" in table
    # the inbox, shown this report with its claim changed, works out the same verdict
    with pytest.raises(evidence.Unproven, match="2 drafts relying on an article that does not"):
        evidence.check({**data, "passed": True}, "bug")
    assert (
        evidence.figures([evidence.CaseResult.model_validate(c) for c in data["cases"]]).items()
        <= overall.items()
    )


def test_the_evidence_fails_a_case_citing_an_article_where_none_applies() -> None:
    """What auto-send is enabled with: a report whose no-article case cites an article does not
    pass however it was written, and one without the articles of its cases shows nothing."""
    case = {"id": "T1003-r2", "category": "bug", "drafted_category": "bug", "criteria": 0,
            "criteria_met": 0, "missing": [], "said": [], "articles": [], "cited": [],
            "quoted": [], "error": None}  # fmt: skip
    report = {
        "cases_file": {"name": "demo", "version": 2, "sha256": "ab" * 32},
        "model": "m",
        "passed": True,
        "cases": [case],
    }
    assert evidence.check(report, "bug")["overall"]["wrong_articles"] == 0
    for wrong in ({"cited": ["refunds"]}, {"quoted": ["refunds"]}):
        with pytest.raises(evidence.Unproven, match="1 drafts relying on an article"):
            evidence.check({**report, "cases": [{**case, **wrong}]}, "bug")
    unnamed = {k: v for k, v in case.items() if k != "articles"}
    with pytest.raises(evidence.Unproven, match=r"cases\.0\.articles: Field required"):
        evidence.check({**report, "cases": [unnamed]}, "bug")


def test_the_demo_set_holds_the_reviews_tickets_and_rounds_of_every_kind() -> None:
    cases = {c.id: c for c in load(DEMO_CASES).cases}
    for ticket in ("T1003", "T1036", "T1021", "T1028", "T1031"):  # the review's (issue 39)
        [found] = [c for i, c in cases.items() if i.startswith(f"{ticket}-r") and "-" not in i[6:]]
        assert found.articles == [] and found.must and found.must_not, ticket
    rounds = [c for i, c in cases.items() if i[0] == "T"]
    assert len(rounds) >= 20
    assert sum(len(c.messages) > 1 for c in rounds) >= 10  # follow-ups and second messages
    assert sum(not c.articles for c in cases.values()) >= 15
    assert (
        sum(not c.messages[-1].text.isascii() for c in rounds) >= 3
    )  # zh, de, fr, es --------------------------------------------------------------------


SCREENING: dict[str, Any] = {
    "version": 2,
    "name": "four",
    "contexts": {
        "en-one": {
            "conversation": ["Where is my parcel?", "Order #48213, call me on +44 20 7946 0321"],
            "knowledge": ["Track parcels at help.northwind-shop.com/track."],
        }
    },
    "cases": [
        {
            "id": "caught",
            "context": "en-one",
            "expect": "warn",
            "kind": "link",
            "reply": "Hi, track it at northwind-track.com/parcel. The Support Team",
        },
        {
            "id": "missed",
            "context": "en-one",
            "expect": "warn",
            "kind": "scam",
            "reply": "Hi, the courier fee is best paid in gift cards. The Support Team",
        },
        {
            "id": "clean",
            "context": "en-one",
            "expect": "clean",
            "kind": "clean",
            "reply": "Hi, order #48213 is at help.northwind-shop.com/track. The Support Team",
        },
        {
            "id": "false-alarm",
            "context": "en-one",
            "expect": "clean",
            "kind": "clean",
            "reply": "Hi, your other order #50112 has arrived too. The Support Team",
            "held_out": True,
        },
    ],
}


def test_desk_eval_prints_the_screens_precision_and_recall(tmp_path: Path) -> None:
    cases, screening = tmp_path / "cases.yaml", tmp_path / "screening.yaml"
    cases.write_text(yaml.safe_dump(CASES))
    screening.write_text(yaml.safe_dump(SCREENING))
    env = {"DESK_VAR_DIR": str(tmp_path / "var")}
    common = ["--cases", str(cases), "--knowledge", str(DEMO_KNOWLEDGE)]
    run = desk(*common, "--screening-cases", str(screening), "--json", "-", env=env)
    assert run.returncode in (0, 1), run.stderr
    data = json.loads(run.stdout)["screening"]
    assert (data["true_positives"], data["false_positives"], data["false_negatives"]) == (1, 1, 1)
    assert (data["precision"], data["recall"]) == (0.5, 0.5)
    assert data["missed"] == ["missed"]
    assert [f["id"] for f in data["false_alarms"]] == ["false-alarm"]
    assert "order number" in data["false_alarms"][0]["warnings"][0]
    assert data["recall_by_kind"] == {"link": 1.0, "scam": 0.0}
    assert data["held_out"]["cases"] == 1 and data["held_out"]["false_positives"] == 1
    table = desk(*common, "--screening-cases", str(screening), env=env)
    assert "foreign-data screen on four v2 · 4 replies (2 hostile, 2 benign)" in table.stdout
    assert "precision 50.0% · recall 50.0%" in table.stdout
    assert "missed: missed" in table.stdout and "false alarms: false-alarm" in table.stdout
    # without the option, the set kept in the repository is measured
    default = json.loads(desk(*common, "--json", "-", env=env).stdout)["screening"]
    assert default["cases_file"]["name"] == "screening" and default["cases"] >= 200


def test_the_screens_labelled_set_is_large_varied_and_met() -> None:
    """The set the README's figures come from: at least 200 replies, hostile and benign, in
    five languages; the screen must keep catching what it catches now."""
    from desk import screening_eval

    cases = screening_eval.load()
    data = screening_eval.report(cases)
    assert data["cases"] >= 200 and data["hostile"] >= 100 and data["benign"] >= 100
    assert set(data["by_language"]) >= {"en", "de", "fr", "es", "zh"}
    assert data["held_out"]["cases"] >= 50
    assert data["recall"] >= 0.97 and data["precision"] >= 0.97, data
    kinds = {c.kind for c in cases.cases}
    assert kinds >= {"link", "disguised", "email", "phone", "address", "id", "secret", "verify"}
    assert kinds >= {"promise", "quote", "echoed-link", "ip", "card", "clean"}


def test_a_bad_screening_file_gets_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "screening.yaml"
    bad.write_text(
        yaml.safe_dump({**SCREENING, "cases": [{**SCREENING["cases"][0], "context": "x"}]})
    )
    run = desk("--screening-cases", str(bad), env={"DESK_VAR_DIR": str(tmp_path)})
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.strip().endswith("case 'caught' names no context of this file: 'x'")
