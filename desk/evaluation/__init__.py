"""`desk eval`: how good the drafts are, measured on a versioned set of cases.

A case file (YAML; the demo's is `desk/evals/demo.yaml`) holds tickets — a conversation whose
last customer messages are what the reply answers — each with the category a careful person
would pick, the knowledge articles a good retrieval finds for it (`articles: []`: none applies;
left out, as in cases from the review log: not known), facts the reply must state
(`must`: case-insensitive phrases, alternatives written `a | b`, a `re:` prefix for a regular
expression) and what it must never say (`must_not`: promises, sums of money), and optionally
the reply a reviewer sent (`reference`, from `--from-review-log`).

Each case is drafted exactly as the drafter drafts (`services.drafter.writer`: the same
retrieval, prompt, model call, checks and one redraft), against the configured model endpoint
(`DESK_LLM_*`, or `--model`; the built-in offline model when none is set), with the built-in
system prompt or `--prompt FILE`, and the knowledge base in `DESK_KNOWLEDGE_DIR` or
`--knowledge` (the demo's articles when neither nor a helpdesk is configured, as `desk up`
gives the demo's drafter). A case that expects no article fails when its draft cites one or
quotes a passage of one (`criteria.QUOTE_WORDS` words in a row of any passage of the knowledge base,
cited or not: an off-topic policy); a case that expects articles fails when its draft relies
only on others. The table says, per category and overall, how often the category was right,
how many criteria were met, how often retrieval found an expected article, and the tokens and
cost; each case not met is listed with what failed and an excerpt of its reply. `--json`
writes everything, case by case, with the case file's sha256 (the inbox recomputes the verdict
from those case results before it lets the report enable auto-send: `shared.evidence`). The
run passes when the category is right in at least 90 % of the cases, at least 90 % of the
criteria are met, no `must_not` was said, no draft relied on an article that does not apply
and no case failed; exit status 0 when it passes, 1 when it does not, 2 when
it could not run. Every run also measures the foreign-data screen on its labelled replies
(`desk/evals/screening.yaml`, or `--screening-cases`): precision and recall, printed after the
table and kept under `screening` in the JSON (`desk.screening_eval`).

`desk eval --from-review-log` turns what reviewers sent (accepted and edited replies, read from
the inbox API) into cases with their category and the sent text as `reference`, writes them to
a case file, and evaluates them: the similarity of each draft to what was sent is reported.

The parts: `cases` (the case file), `criteria` (what a reply says and quotes), `drafting`
(each case drafted with the candidate), `outcome` (a case's result), `report` (the figures
and the table), `review_log` (cases from what reviewers sent), `command` (`desk eval`).
"""

from .cases import DEMO_CASES, Case, CaseFile, load
from .command import add_arguments, main
from .criteria import MONEY, met, quotations
from .drafting import RETRIEVERS, candidate, configured, prompt_of, run
from .errors import EvalError
from .outcome import Outcome
from .report import Report, render

__all__ = [
    "DEMO_CASES",
    "MONEY",
    "RETRIEVERS",
    "Case",
    "CaseFile",
    "EvalError",
    "Outcome",
    "Report",
    "add_arguments",
    "candidate",
    "configured",
    "load",
    "main",
    "met",
    "prompt_of",
    "quotations",
    "render",
    "run",
]
