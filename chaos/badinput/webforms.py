"""The web forms group: the review inbox's HTML forms posted with hostile text, as a logged-in
reviewer's browser would post them and as another site or a stale page would.

One session logs in with the reviewer token; each drawn post names a form (edit preview,
decision, claim and release, audit, standing instruction and its actions, bulk ignore, login),
a target (a real waiting item, one that does not exist, a path trick), a CSRF token (the
session's, none, a wrong one), an Origin (none, this site, another site), an encoding (a form,
invalid UTF-8 or percent-escapes, a multipart file, too many fields, too large) and text from
the prompt-level instructions dressed as there, or very long, or any Unicode.

What must hold: no 5xx and no dropped connection; nothing another site or a form without the
session's token posts succeeds (a 2xx or a redirect elsewhere than the login page is a forgery);
a login with anything but a token never logs in. Decisions the forms did take are counted, so
the campaign's "no event from a rejected request" still balances.
"""

from __future__ import annotations

import re
import time
from typing import Any
from urllib.parse import quote

import httpx
from hypothesis import strategies as st

from ..facts import log
from .campaign import Campaign
from .prompts import DRESSES, INSTRUCTIONS, dressed
from .strategies import run_examples, unicode_texts

FORMS = (
    "edit",
    "decide",
    "claim",
    "release",
    "audit",
    "instruction",
    "instruction-action",
    "bulk-ignore",
    "login",
)
CSRF_MODES = ("session", "session", "session", "none", "wrong")  # mostly the session's
ORIGINS = ("none", "none", "same", "foreign")
ENCODINGS = ("form", "form", "form", "bad-utf8", "bad-escape", "file", "fields", "large")
FOREIGN = "https://evil-support.example"
MAX_FORM_BYTES = 256 * 1024  # what the inbox reads at most (services/inbox_api/web/forms.py)


class WebForms:
    def __init__(
        self, c: Campaign, client: httpx.Client, stranger: httpx.Client, items: list[str]
    ) -> None:
        self.c = c
        self.client = client  # the reviewer's session
        self.stranger = stranger  # no session: the login form's visitor
        self.items = items
        self.csrf = ""
        self.decided: set[str] = set()  # real items a form may have decided

    def log_in(self) -> None:
        answer = self.client.post("/login", data={"token": self.c.reviewer})
        if answer.status_code != 303:
            raise RuntimeError(f"the reviewer could not log in: {answer.status_code}")
        page = self.client.get("/inbox")
        found = re.search(r'name="csrf" value="([^"]+)"', page.text)
        if not found:
            raise RuntimeError("no CSRF token on the inbox page")
        self.csrf = found.group(1)

    def post(self, drawn: dict[str, Any]) -> None:
        t = self.c.tally
        form, target = drawn["form"], drawn["target"]
        fields: list[tuple[str, str]] = list(drawn["fields"])
        if drawn["csrf"] == "session":
            fields.append(("csrf", self.csrf))
        elif drawn["csrf"] == "wrong":
            fields.append(("csrf", drawn["wrong"]))
        headers = {}
        if drawn["origin"] == "same":
            headers["Origin"] = self.c.inbox
        elif drawn["origin"] == "foreign":
            headers["Origin"] = FOREIGN
        path = {
            "edit": f"/items/{target}/edit",
            "decide": f"/items/{target}/decide",
            "claim": f"/items/{target}/claim",
            "release": f"/items/{target}/release",
            "audit": f"/items/{target}/audit",
            "instruction": "/instructions",
            "instruction-action": f"/instructions/{drawn['number']}",
            "bulk-ignore": "/inbox/ignore",
            "login": "/login",
        }[form]
        group = f"web/{form}"
        what = f"{group} csrf={drawn['csrf']} origin={drawn['origin']} {drawn['encoding']}"
        try:
            client = self.stranger if form == "login" else self.client
            answer = self._send(client, path, fields, headers, drawn["encoding"])
        except (httpx.LocalProtocolError, UnicodeEncodeError):
            t.unsendable += 1
            return
        except httpx.TransportError as exc:
            t.dropped(group, what, exc)
            return
        status = answer.status_code
        t.answered(group, status)
        if status >= 500:
            t.server_errors.append(f"{what} -> {status} {answer.text[:120]}")
            return
        location = answer.headers.get("location", "")
        succeeded = status < 300 or (300 <= status < 400 and not location.startswith("/login"))
        if form == "login":
            if status == 303 and location == "/inbox":
                t.forgeries.append(f"{what}: logged in with {fields[:1]!r:.60}")
            return
        if succeeded and (drawn["csrf"] != "session" or drawn["origin"] == "foreign"):
            t.forgeries.append(f"{what} -> {status} {location}")
        if form in ("decide", "bulk-ignore") and target in self.items:
            self.decided.add(target)
        if form == "bulk-ignore":
            self.decided.update(v for k, v in fields if k == "item" and v in self.items)

    @staticmethod
    def _send(
        client: httpx.Client,
        path: str,
        fields: list[tuple[str, str]],
        headers: dict[str, str],
        encoding: str,
    ) -> httpx.Response:
        urlencoded = {"content-type": "application/x-www-form-urlencoded", **headers}
        if encoding == "bad-utf8":
            raw = "&".join(f"{quote(k)}={quote(v)}" for k, v in fields) + "&reply=%ff%fe%c0%af"
            return client.post(path, content=raw.encode(), headers=urlencoded)
        if encoding == "bad-escape":
            raw = "&".join(f"{quote(k)}={quote(v)}" for k, v in fields) + "&note=%zz%4&%=%"
            return client.post(path, content=raw.encode(), headers=urlencoded)
        if encoding == "file":
            files = {"reply": ("reply.txt", b"REPEAT EXAMPLES", "text/plain")}
            return client.post(path, data=_data(fields), files=files, headers=headers)
        if encoding == "fields":
            many = fields + [(f"f{n}", "x") for n in range(40)]
            return client.post(path, data=_data(many), headers=headers)
        if encoding == "large":
            big = [*fields, ("reply", "A" * (MAX_FORM_BYTES + 1024))]
            return client.post(path, data=_data(big), headers=headers)
        return client.post(path, data=_data(fields), headers=headers)


def _data(fields: list[tuple[str, str]]) -> dict[str, list[str]]:
    """Form fields for httpx, a name given twice sent twice."""
    data: dict[str, list[str]] = {}
    for name, value in fields:
        data.setdefault(name, []).append(value)
    return data


def hostile_texts() -> st.SearchStrategy[str]:
    @st.composite
    def build(draw: Any) -> str:
        return dressed(draw(st.sampled_from(INSTRUCTIONS)), draw(st.sampled_from(DRESSES)), draw)

    return st.one_of(
        build(),
        unicode_texts,
        st.integers(20_001, 30_000).map(lambda n: "R" * n),  # longer than a reply may be
        st.sampled_from(["", " ", "\x00", "\r\n" * 50, "<script>alert(1)</script>"]),
    )


def form_posts(items: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    targets = st.one_of(
        st.sampled_from(items) if items else st.just("T0000~v1"),
        st.sampled_from(["T0000~v1", "..%2f..%2fapi", "%00", "x" * 300, "T1012~v0"]),
    )
    versions = st.one_of(
        st.sampled_from(["1", "2"]), st.sampled_from(["0", "-1", "1e9", "", "abc", "9" * 30])
    )

    @st.composite
    def build(draw: Any) -> dict[str, Any]:
        form = draw(st.sampled_from(FORMS))
        text = hostile_texts()
        fields: list[tuple[str, str]] = []
        if form in ("edit", "decide"):
            kind = draw(st.sampled_from(["accept", "edit", "response", "ignore", "approve", ""]))
            fields = [("type", kind), ("version", draw(versions)), ("reply", draw(text))]
            fields += [("feedback", draw(text)), ("confirm", draw(st.sampled_from(["1", "0"])))]
        elif form == "claim":
            fields = [("take_over", draw(st.sampled_from(["1", "0", "yes"])))]
        elif form == "audit":
            verdict = draw(st.sampled_from(["fine", "edited", "meh", ""]))
            fields = [("verdict", verdict), ("note", draw(text))]
        elif form == "instruction":
            category = draw(st.sampled_from(["refund", "invoice", "other", "escalation", ""]))
            fields = [("text", draw(text)), ("category", category)]
        elif form == "instruction-action":
            action = draw(st.sampled_from(["retire", "approve", "delete", "", "drop table"]))
            fields = [("action", action)]
        elif form == "bulk-ignore":
            chosen = draw(st.lists(targets, max_size=3))
            fields = [("item", i) for i in chosen] + [("confirmed", "1")]
        elif form == "login":
            fields = [("token", draw(text))]
        return {
            "form": form,
            "target": draw(targets),
            "number": draw(st.sampled_from(["1", "2", "999999", "-1", "x"])),
            "fields": fields,
            "csrf": draw(st.sampled_from(CSRF_MODES)),
            "wrong": draw(
                st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=60)
            ),
            "origin": draw(st.sampled_from(ORIGINS)),
            "encoding": draw(st.sampled_from(ENCODINGS)),
        }

    return build()


def webforms_campaign(c: Campaign, items: list[str], examples: int) -> None:
    """Log in, post the drawn forms, count the decisions they took."""
    started = time.monotonic()
    with (
        httpx.Client(base_url=c.inbox, timeout=15) as client,
        httpx.Client(base_url=c.inbox, timeout=15) as stranger,
    ):
        web = WebForms(c, client, stranger, items)
        web.log_in()
        run_examples(
            form_posts(items),
            max(examples // 4, 30),
            c.seed + 400,
            web.post,
            c.tally,
            "web forms",
        )
        auth = {"Authorization": f"Bearer {c.reviewer}"}
        for item_id in sorted(web.decided):  # what a form did decide is a decision, once
            shown = client.get(f"/api/items/{quote(item_id, safe='~')}", headers=auth)
            if shown.status_code == 200 and shown.json().get("decisions"):
                c.tally.decided.add(item_id)
    log(
        f"web forms: {sum(n for g, n in c.tally.tried.items() if g.startswith('web/'))} posts "
        f"in {time.monotonic() - started:.1f}s"
    )
