"""The `desk eval` command: its options, and a run from the case file to the printed report."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from shared import evidence

from .. import screening_eval
from ..private import write_private
from .cases import DEMO_CASES, CaseFile, load
from .drafting import RETRIEVERS, candidate, prompt_of, run
from .errors import EvalError
from .report import render
from .review_log import cases_from_inbox


def add_arguments(subparsers: Any) -> None:
    ev = subparsers.add_parser("eval", help="measure the drafts on a set of cases")
    ev.add_argument("--cases", type=Path, help=f"a case file (default: {DEMO_CASES.name})")
    ev.add_argument("--model", help="the model name at the endpoint (default: DESK_LLM_MODEL)")
    ev.add_argument("--prompt", type=Path, help="a file holding the system prompt to try")
    ev.add_argument(
        "--knowledge", type=Path, help="the knowledge directory (default: DESK_KNOWLEDGE_DIR)"
    )
    ev.add_argument(
        "--retriever",
        choices=RETRIEVERS,
        help="how passages are found (default: DESK_KNOWLEDGE_RETRIEVER, bm25)",
    )
    ev.add_argument(
        "--from-review-log",
        action="store_true",
        help="make cases of the replies reviewers sent (inbox API) and evaluate those",
    )
    ev.add_argument("--url", help="inbox API base URL (default: the running stack's)")
    ev.add_argument("--token", help="reviewer or viewer token (default: $DESK_TOKEN)")
    ev.add_argument("--write", type=Path, help="with --from-review-log: where to save the cases")
    ev.add_argument("--json", type=Path, help="write the full report as JSON here ('-': stdout)")
    ev.add_argument(
        "--screening-cases",
        type=Path,
        help="labelled replies to measure the foreign-data screen on"
        f" (default: {screening_eval.SCREENING_CASES.name})",
    )


def main(args: argparse.Namespace) -> int:
    from .. import inbox

    try:
        settings = candidate(args.model, args.knowledge, args.retriever)
        system, prompt_name = prompt_of(args.prompt)
        if args.from_review_log:
            try:
                url, token = inbox.connection(args, settings.var_dir)
            except inbox.InboxError as exc:
                raise EvalError(str(exc)) from None
            cases = asyncio.run(cases_from_inbox(url, token))
            target = args.write or settings.var_dir / "evals" / "review-log.yaml"
            _save(cases, target)
            cases.sha256 = evidence.digest(target.read_bytes())  # the file as written
            print(f"{len(cases.cases)} cases from the review log written to {target}")
        else:
            cases = load(args.cases or DEMO_CASES)
        screened = args.screening_cases or screening_eval.SCREENING_CASES
        try:
            screening = screening_eval.report(screening_eval.load(screened), screened)
        except screening_eval.ScreeningError as exc:
            raise EvalError(str(exc)) from None
        report = asyncio.run(run(cases, settings, system, prompt_name))
        report.screening = screening
    except EvalError as exc:
        print(f"desk eval: {exc}", file=sys.stderr)
        return 2
    data = report.as_json()
    if args.json is not None and str(args.json) == "-":
        print(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        print(render(report))
        if args.json is not None:
            write_private(args.json, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
            print(f"report written to {args.json}")
    return 0 if data["passed"] else 1


def _save(cases: CaseFile, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = cases.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
