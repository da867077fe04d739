"""Error answers as api.openai.com gives them: the JSON error body, and header values."""

from __future__ import annotations

from typing import Any

# status -> (error type, error code), as api.openai.com labels them
_ERROR_KINDS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    409: ("invalid_request_error", "conflict"),
    422: ("invalid_request_error", None),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    502: ("server_error", None),
    503: ("server_error", "service_unavailable"),
    504: ("server_error", None),
}

_ERROR_MESSAGES: dict[int, str] = {
    400: "Invalid request.",
    401: "Incorrect API key provided.",
    403: "Access denied.",
    404: "The model does not exist or you do not have access to it.",
    429: "Rate limit reached for requests.",
    500: "The server had an error while processing your request.",
    502: "Bad gateway.",
    503: "The engine is currently overloaded, please try again later.",
}


def header_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def error_body(status: int, message: str | None = None, code: str | None = None) -> dict[str, Any]:
    kind, default_code = _ERROR_KINDS.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None)
    )
    return {
        "error": {
            "message": message or _ERROR_MESSAGES.get(status, f"Error {status}."),
            "type": kind,
            "param": None,
            "code": code if code is not None else default_code,
        }
    }
