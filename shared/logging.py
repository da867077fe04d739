"""JSON logs that carry the event id and correlation id, with secrets and personal data redacted.

Redaction happens in the formatter, so no call site can forget it: e-mail addresses, phone
numbers, bearer tokens, webhook secrets (`whsec_…`), API keys (`sk-…`) and `secret=`/`token=`/
`password=` style pairs never reach the output.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import json
import logging
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from . import trace

event_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("event_id", default=None)
correlation_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "correlation_id", default=None
)

REDACTED = "[redacted]"

_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"
_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]+"), "Bearer " + REDACTED),
    # key=value / "key": "value" pairs whose key names a secret
    (
        re.compile(
            r"(?i)(\"?\b[\w-]*(?:secret|token|password|passwd|api[_-]?key|authorization|signature)"
            r"[\w-]*\"?\s*[:=]\s*\"?)([^\s\",;}]+)"
        ),
        r"\1" + REDACTED,
    ),
    (re.compile(r"\bwhsec_[A-Za-z0-9+/=]+"), REDACTED),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{8,}"), REDACTED),
    (re.compile(r"\bv1,[A-Za-z0-9+/=]{20,}"), REDACTED),  # Standard Webhooks signatures
    (re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"), "[email]"),
    # phone numbers: international (+…), grouped national (555-123-4567, (030) 1234 5678),
    # and mainland-China mobiles; bare counters, timestamps, dates, addresses and IPv4
    # addresses (throttling logs the client's) stay readable
    (
        re.compile(
            r"(?<![\w.:+-])(?!" + _IPV4 + r"(?![\w.:-]))(?:\+\d[\d\s().-]{6,}\d"
            r"|\(?\d{2,4}\)?[\s.-]\d{2,4}[\s.-]\d{3,4}(?:[\s.-]\d{2,4})?"
            r"|1[3-9]\d{9})(?![\w.:-])"
        ),
        "[phone]",
    ),
]


# Per pattern: substrings one of which any match must contain (lower case where the pattern
# ignores case; None: always run). Most lines contain none, and `in` costs far less than the
# patterns do: this keeps redaction to a few microseconds a line.
_NEEDS: list[tuple[str, ...] | None] = [
    ("bearer",),
    ("secret", "token", "password", "passwd", "api", "authorization", "signature"),
    ("whsec_",),
    ("sk-",),
    ("v1,",),
    ("@",),
    None,
]
_STEPS = [
    (pattern, replacement, needs, bool(pattern.flags & re.IGNORECASE))
    for (pattern, replacement), needs in zip(_PATTERNS, _NEEDS, strict=True)
]


def redact(text: str) -> str:
    folded = text.casefold()  # what (?i) matches, as plain text
    for pattern, replacement, needs, ignore_case in _STEPS:
        if needs is not None:
            haystack = folded if ignore_case else text
            if not any(n in haystack for n in needs):
                continue
        text = pattern.sub(replacement, text)
    return text


_RESERVED = set(logging.makeLogRecord({}).__dict__) | {
    "message",
    "asctime",
    "taskName",
    "color_message",
}


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "service": self.service,
            "logger": record.name,
            "message": record.getMessage(),
        }
        event_id = getattr(record, "event_id", None) or event_id_var.get()
        correlation_id = getattr(record, "correlation_id", None) or correlation_id_var.get()
        if event_id:
            entry["event_id"] = event_id
        if correlation_id:
            entry["correlation_id"] = correlation_id
        trace_id = trace.trace_id()
        if trace_id:
            entry["trace_id"] = trace_id
        for key, value in record.__dict__.items():
            if key not in _RESERVED and key not in entry and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return redact(json.dumps(entry, default=str, ensure_ascii=False))


class TextFormatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__(f"%(asctime)s %(levelname)s {service} %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        trace_id = trace.trace_id()
        return redact(f"{line} [trace {trace_id}]" if trace_id else line)


def configure(service: str, level: str = "INFO", fmt: str = "json") -> None:
    """Send every log record of this process to stderr, formatted and redacted."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(service) if fmt == "json" else TextFormatter(service))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("nats", "uvicorn.access", "httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))


@contextmanager
def bound(event_id: str | None, correlation_id: str | None = None) -> Iterator[None]:
    """Attach ids to every record logged inside the block (per asyncio task)."""
    tokens = (event_id_var.set(event_id), correlation_id_var.set(correlation_id or event_id))
    try:
        yield
    finally:
        event_id_var.reset(tokens[0])
        correlation_id_var.reset(tokens[1])
