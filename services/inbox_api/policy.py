"""The auto-send policy as the inbox's settings say (`DESK_AUTOSEND_*`, `DESK_AUDIT_KEY`)."""

from __future__ import annotations

import logging
import secrets

from shared.settings import InboxApiSettings

from .store.autosend import Policy

log = logging.getLogger(__name__)


def configured(settings: InboxApiSettings) -> Policy:
    return Policy(
        settings.autosend_evidence,
        settings.autosend_unedited,
        settings.autosend_audit,
        settings.autosend_demote,
        per_ticket_day=settings.autosend_per_ticket_day,
        audit_key=_audit_key(settings),
    )


def _audit_key(settings: InboxApiSettings) -> bytes:
    """DESK_AUDIT_KEY (required with configured reviewers; `desk up` passes the one it made);
    without one, a key of this run's own: the audit sample stays unpredictable."""
    if settings.audit_key is not None:
        return settings.audit_key.get_secret_value().encode()
    log.warning("no DESK_AUDIT_KEY: the audit sample is keyed with a key of this run's own")
    return secrets.token_bytes(32)
