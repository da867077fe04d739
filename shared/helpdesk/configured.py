"""The source system that `HelpdeskSettings` describe."""

from __future__ import annotations

from ..settings import HelpdeskSettings
from .base import SourceSystem
from .factory import open_source


def open_configured(settings: HelpdeskSettings) -> SourceSystem:
    auth = settings.helpdesk_auth_value
    return open_source(
        settings.helpdesk_kind,
        settings.helpdesk_location(),
        tickets_path=settings.helpdesk_tickets_path,
        ticket_path=settings.helpdesk_ticket_path,
        articles_path=settings.helpdesk_articles_path,
        auth_header=settings.helpdesk_auth_header,
        auth_value=auth.get_secret_value() if auth else None,
        connect_timeout=settings.helpdesk_connect_timeout,
        read_timeout=settings.helpdesk_read_timeout,
    )
