"""The inbox API over HTTP, as `desk inbox` calls it."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx

from .errors import InboxError

TIMEOUT = 10.0


class Client:
    """The inbox API calls the CLI makes; every failure becomes an InboxError."""

    def __init__(self, url: str, token: str, timeout: float = TIMEOUT) -> None:
        self.url = url
        self._http = httpx.Client(
            base_url=url,
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
            timeout=timeout,
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()

    def items(self, params: dict[str, str]) -> dict[str, Any]:
        return self._call("GET", "/api/items", params=params)

    def item(self, item_id: str) -> dict[str, Any]:
        return self._call("GET", f"/api/items/{_path(item_id)}")

    def decide(self, item_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", f"/api/items/{_path(item_id)}/decision", json=body)

    def claim(self, item_id: str, take_over: bool = False) -> dict[str, Any]:
        body = {"take_over": take_over}
        return self._call("POST", f"/api/items/{_path(item_id)}/claim", json=body)

    def release(self, item_id: str) -> dict[str, Any]:
        return self._call("DELETE", f"/api/items/{_path(item_id)}/claim")

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        try:
            answer = self._http.request(method, path, **kwargs)
        except httpx.TimeoutException:
            raise InboxError(
                f"the inbox API at {self.url} did not answer within {self._http.timeout.read}s"
            ) from None
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise InboxError(
                f"cannot reach the inbox API at {self.url} ({exc.__class__.__name__});"
                " is the stack running (`desk status`)?"
            ) from None
        try:
            body = answer.json()
        except ValueError:
            body = None
        if answer.status_code >= 400:
            message = body.get("error") if isinstance(body, dict) else None
            raise InboxError(f"{answer.status_code} {message or answer.reason_phrase}".strip())
        if not isinstance(body, dict):
            raise InboxError(
                f"{self.url} answered {answer.status_code} without a JSON object;"
                " is it the inbox API?"
            )
        return body


def _path(item_id: str) -> str:
    return quote(item_id, safe="~")
