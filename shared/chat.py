"""Customer text in the team's chat, inert: quoted so that nothing in it is live.

A subject, a customer's name or an excerpt reaches a Slack or Mattermost channel inside our own
message. Whatever the customer wrote there must read as text: no link, image, mention
(`@channel`, `<!here>`, `<@U…>`), channel or hashtag link, and no formatting it did not earn.

Both chats, every field:
- one line: CR/LF and other control characters become a space; invisible format characters
  (zero-width, bidi overrides) are dropped, so nothing hides or reverses what the team reads;
- `&`, `<` and `>` as entities: no `<url|text>`, `<!channel>`, `<@U…>`, HTML or autolink opens;
- a WORD JOINER (U+2060, invisible, not a space) after every `@`, `~` and `#` that starts a
  word, inside `://` and after each dot between letters or digits: no mention, channel link,
  hashtag, URL or bare domain (`evil.example/reset`) is recognised, yet the team reads the text
  as written.

Then each chat's own markup:
- Slack (`mrkdwn`): it has no escape character, and turning markup off for the whole post
  would turn off our own mentions too, so `*`, `_`, `~` and the backtick become their look-alikes
  (U+2217, U+02CD, U+223C, U+02CB), which mean nothing to it;
- Mattermost (Markdown): every Markdown punctuation mark is backslash-escaped, which both
  CommonMark and Mattermost's renderer honour.

And neither chat fetches a preview of anything: `unfurl_links`/`unfurl_media` false for Slack;
Mattermost has no such switch per post, and with no link left in the text there is nothing to
preview. Our own mentions are added by the caller after quoting, the only markup it makes.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, Literal, get_args

Flavour = Literal["slack", "mattermost"]
FLAVOURS: tuple[str, ...] = get_args(Flavour)

JOINER = "\u2060"  # WORD JOINER: zero width, not whitespace, no line break

_ENTITIES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
# `@name`, `~channel`, `#tag`; `scheme://`; `a.b` (a domain, an IP address, `www.`)
_STARTS = re.compile(r"([@~#])(?=\w)")
_SCHEME = re.compile(r":(?=//)")
_DOT = re.compile(r"(?<=\w)\.(?=\w)")
# Slack's formatting marks, as look-alikes; Mattermost's Markdown punctuation (the marks its
# renderer escapes)
_SLACK_MARKS = str.maketrans({"*": "\u2217", "_": "\u02cd", "~": "\u223c", "`": "\u02cb"})
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-!|~])")


def one_line(value: str) -> str:
    """`value` as one line: CR/LF and control characters a space, invisible format characters
    dropped, runs of whitespace one space."""
    kept = []
    for char in value:
        kind = unicodedata.category(char)
        if kind == "Cf":
            continue
        kept.append(" " if kind in ("Cc", "Zl", "Zp") else char)
    return " ".join("".join(kept).split())


def quote(value: str, flavour: Flavour) -> str:
    """One line of customer text, inert in `flavour`'s markup (see the module's docstring)."""
    text = one_line(value)
    if flavour == "mattermost":
        text = _MARKDOWN.sub(r"\\\1", text)
    text = text.translate(_ENTITIES)
    text = _STARTS.sub(r"\1" + JOINER, text)
    text = _SCHEME.sub(":" + JOINER, text)
    text = _DOT.sub("." + JOINER, text)
    if flavour == "slack":
        text = text.translate(_SLACK_MARKS)
    return text


def quote_lines(text: str, flavour: Flavour) -> str:
    """Several lines (a report), each quoted on its own; leading spaces kept as an indent."""
    lines = []
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        lines.append("\u00a0" * indent + quote(line, flavour))  # no-break: a chat keeps them
    return "\n".join(lines)


def payload(text: str, flavour: Flavour) -> dict[str, Any]:
    """The incoming-webhook body for `text`, with link and media previews off."""
    if flavour == "slack":
        return {"text": text, "unfurl_links": False, "unfurl_media": False}
    return {"text": text}
