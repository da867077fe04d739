"""An error answer of the model endpoint, read once: a refusal of what a mode sends (auto then
asks the next mode), a refusal of this prompt's content (`ModelFailed`: a person writes that
ticket's reply), or an outage (`EndpointFailure`, the breaker's; without one, a
`TransientError`). The model module's docstring says which is which."""

from __future__ import annotations

import re

import openai

from shared import answers
from shared.errors import DeskError, PermanentError, TransientError, Unavailable

from .health import EndpointFailure, ModelFailed
from .output import Mode

# What a refusal of a mode says. Matched on the server's message because the status alone
# cannot tell "no tools here" from a malformed or over-long request (both are 400s).
_FEATURE: dict[Mode, re.Pattern[str]] = {
    "tool": re.compile(r"tool|function", re.IGNORECASE),
    "json_schema": re.compile(r"response_format|json_schema|structured", re.IGNORECASE),
}
_UNSUPPORTED = re.compile(
    r"support|requir|not implemented|unknown|unrecognized|not allowed|not permitted",
    re.IGNORECASE,
)
_REFUSING = (400, 404, 422, 501)


class Refused(Exception):
    """The endpoint refused what the mode sends (never leaves the model's call: `model`)."""

    def __init__(self, status: int) -> None:
        super().__init__(f"refused ({status})")
        self.status = status


def refuses(exc: openai.APIStatusError, mode: Mode) -> bool:
    """Did the endpoint refuse the request because of what `mode` sends? Never for a 429 or a
    502/503/504; a 500 only when it says the feature is unsupported ("tools param requires
    --jinja flag", llama.cpp's server)."""
    feature = _FEATURE.get(mode)
    if feature is None:
        return False  # json mode sends nothing a server could refuse
    text = f"{exc.message} {exc.body}"
    if exc.status_code in _REFUSING:
        return feature.search(text) is not None
    if exc.status_code == 500:
        return feature.search(text) is not None and _UNSUPPORTED.search(text) is not None
    return False


# A refusal of what this prompt says (its size, its content): the ticket's own problem.
CONTENT_REFUSED = (400, 413, 422)


def mapped(exc: openai.APIStatusError) -> DeskError:
    """An error answer that is not a refusal of the mode: an outage of the endpoint, or (400,
    413, 422) a refusal of this ticket's prompt. `shared.answers` reads the Retry-After."""
    status = exc.status_code
    if status in CONTENT_REFUSED:
        return ModelFailed(f"the model endpoint refused the request ({status})")
    found = answers.error(status, "", exc.response.headers)
    retry_after = getattr(found, "retry_after", None)
    if status == 429:
        return EndpointFailure(
            "model rate-limited (429)", kind="overloaded", retry_after=retry_after
        )
    if answers.kind(status) != "permanent":
        return EndpointFailure(
            f"model endpoint answered {status}", kind="server", retry_after=retry_after
        )
    if status in (401, 403):
        return EndpointFailure(
            f"model endpoint refused our credentials ({status}): check DESK_LLM_API_KEY",
            kind="refused",
        )
    return EndpointFailure(
        f"model endpoint refused the request ({status}): check DESK_LLM_BASE_URL and "
        "DESK_LLM_MODEL",
        kind="refused",
    )


def without_health(failure: EndpointFailure) -> DeskError:
    """An outage as a caller without a breaker sees it (`desk eval`, `desk shadow`)."""
    if failure.kind == "overloaded":
        return Unavailable(str(failure), retry_after=failure.retry_after)
    if failure.kind == "refused":
        return PermanentError(str(failure))
    return TransientError(str(failure), retry_after=failure.retry_after)
