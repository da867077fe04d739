"""How the screen reads a text: Unicode compatibility forms without invisible characters
(`nfkc`), case- and space-folded (`folded`), defanged links and addresses written plainly
(`undisguised`), and in words (`tokens_of`; CJK: one character a word).
"""

from __future__ import annotations

import re
import unicodedata

_SPELLED_TLDS = "com|net|org|io|info|biz|co|app|de|fr|es|cn|uk|eu|ru|xyz|top"
_DISGUISES: list[tuple[re.Pattern[str], str]] = [
    # hxxp://, hxxps[:]//, h**ps://, "https : //"
    (
        re.compile(r"\bh(?:xx|\*\*|XX|tt)p(s?) ?(?:\[:\]|\(:\)|:) ?//", re.IGNORECASE),
        r"http\1://",
    ),
    (
        re.compile(
            r"[ \t]{0,3}(?:\[ ?(?:\.|dot) ?\]|\( ?(?:\.|dot) ?\)|\{ ?(?:\.|dot) ?\})[ \t]{0,3}",
            re.I,
        ),
        ".",
    ),
    (
        re.compile(
            r"[ \t]{0,3}(?:\[ ?(?:@|at) ?\]|\( ?(?:@|at) ?\)|\{ ?(?:@|at) ?\})[ \t]{0,3}", re.I
        ),
        "@",
    ),
    (re.compile(r"\[\s*:\s*\]|\[://\]"), ":"),
    # evil-support dot com, evil-support [dot] com (the bracketed forms are above)
    (re.compile(rf"(?<=[a-z0-9])\s+(?:dot|\.)\s+(?=(?:{_SPELLED_TLDS})\b)", re.I), "."),
    (
        re.compile(r"(?<=[a-z0-9])\s+(?:punkt|point|punto)\s+(?=(?:com|net|org|io|info)\b)", re.I),
        ".",
    ),
    # a full stop between Latin letters: example。com
    (re.compile(r"(?<=[A-Za-z0-9])[。｡](?=[A-Za-z]{2,24}\b)"), "."),
]
DISGUISED = re.compile(
    r"\bh(?:xx|\*\*)ps?\b|\[ ?(?:\.|dot|@|at|:) ?\]|\( ?(?:\.|dot|@) ?\)|\{ ?(?:\.|dot) ?\}"
    rf"|(?<=[a-z0-9])\s+(?:dot|\.)\s+(?:{_SPELLED_TLDS})\b"
    r"|(?<=[a-z0-9])\s+(?:punkt|point|punto)\s+(?:com|net|org|io|info)\b"
    r"|(?<=[A-Za-z0-9])[。｡](?=[A-Za-z]{2,24}\b)",
    re.IGNORECASE,
)


# invisible characters (zero-width, soft hyphen, direction marks) that split a word or a
# domain for a pattern and not for the reader
_INVISIBLE = re.compile(
    "[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff]"
)


def nfkc(text: str) -> str:
    return _INVISIBLE.sub("", unicodedata.normalize("NFKC", text))


def undisguised(text: str) -> str:
    """`text` with defanged links and addresses written plainly (hxxp → http, [.] → .)."""
    text = nfkc(text)
    for pattern, plain in _DISGUISES:
        text = pattern.sub(plain, text)
    return text


def folded(text: str) -> str:
    return " ".join(nfkc(text).casefold().split())


# a character of the scripts written without spaces (kana, CJK ideographs)
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]")
_TOKEN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]|[^\W_]+", re.UNICODE)


def tokens_of(text: str) -> list[str]:
    return _TOKEN.findall(nfkc(text).casefold())
