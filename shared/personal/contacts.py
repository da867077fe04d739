"""Ways to reach a person in a text: e-mail addresses (`emails`), links, bare domains and IP
addresses (`links`), and phone numbers (`phones`), told apart from prices, dates and amounts.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .span import Span

# --- e-mail addresses and links ----------------------------------------------------------------

_EMAIL = re.compile(r"(?<![\w.%+-])[\w.%+-]+@[\w-]+(?:\.[\w-]+)*\.[^\W\d_]{2,}(?![\w-])")

_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_DOT = r"(?:\.|\[\.\]|\(\.\)|\[dot\])"  # defanged dots as well: evil[.]com
_TAIL = r"(?::\d{1,5})?(?:[/?#][^\s<>\"'`]*)?"
_URL = re.compile(
    r"(?i)(?<![\w])(?:h(?:tt|xx|\*\*|XX)ps?|ftp|sftp|wss?)(?::|\[:\])//[^\s<>\"'`]+"
    r"|(?<![\w.])www\d?" + _DOT + r"[^\s<>\"'`]+"
)
_IP = re.compile(rf"(?<![\w.]){_OCTET}(?:{_DOT}{_OCTET}){{3}}(?![\w]|\.\d){_TAIL}")
_DOMAIN = re.compile(
    r"(?i)(?<![\w@.-])((?:[^\W_](?:[\w-]{0,61}[^\W_])?" + _DOT + r")+)"
    r"([a-z]{2,24})(?![\w-])(" + _TAIL + ")"
)
# Top-level domains that count without a path after them: the common generic ones and the
# country codes of the markets served; file extensions that are also country codes (.py, .sh,
# .md, .rs) stay out, unless a path follows (then any letters do).
_TLDS = frozenset(
    """com net org info biz edu gov mil int io ai app dev shop store online site xyz top link
    support help live tech cloud email club vip pro co me tv ly gl to cc eu asia mobi name
    de at ch fr be nl lu es pt it ie uk us ca au nz pl cz sk hu ro bg gr se no dk fi is ee lv
    lt ru ua by tr il ae sa in cn hk tw jp kr sg my th vn id ph br mx ar cl pe za ng ke eg ma
    """.split()
)
_TRAILING = ".,;:!?)]}'\""

# --- phone numbers -----------------------------------------------------------------------------

# Digit groups joined by one separator each (or a bracketed area code), so each text is read
# once; which of the candidates are phone numbers is decided in `phones`.
_PHONE = re.compile(
    r"(?<![\w@+#&])(?<!\d[.,:/-])"
    r"(?:\+\s?|\(\s?\+?)?\d+\)?(?:(?:[ .\-/]|\s?\(\d+\)\s?|\)\s?)\d+)*"
    r"(?![\w@]|[.,:/-]\d)"
)
_PHONE_WORD = re.compile(
    r"(?i)(?:\b(?:tel|tél|phone|telephone|téléphone|teléfono|telefon|telefono|mobile|mobil"
    r"|handy|portable|móvil|movil|cell|fax|call|ring|anrufen|appelez|llame|llamar|whatsapp"
    r"|hotline|number|nummer|numéro|número)\b|电话|手机|联系方式|致电)[^\n\d+]{0,12}$"
)
_MONEY = re.compile(
    r"(?i)(?:[$€£¥₹]|\b(?:eur|euro|euros|usd|gbp|chf|cny|rmb|jpy|dollars?|pounds?|yuan)\b"
    r"|元|円)"
)
_DATE = re.compile(r"\d{1,4}([./-])\d{1,2}\1\d{1,4}|\d{4}[./-]\d{1,2}|\d{1,2}[./-]\d{4}")
_THOUSANDS = re.compile(r"[1-9]\d{0,2}([ .,'])\d{3}(?:\1\d{3})*")
_CN_MOBILE = re.compile(r"(?:\+?86[\s-]?)?1[3-9]\d[\s-]?\d{4}[\s-]?\d{4}")
DIGIT = re.compile(r"\d")


def emails(text: str) -> Iterator[Span]:
    """The e-mail addresses in `text`."""
    if "@" in text:
        for m in _EMAIL.finditer(text):
            yield Span("email", m.start(), m.end(), m.group())


def links(text: str) -> Iterator[Span]:
    """The links, IP addresses and bare domains (of a known top-level domain, or with a path)
    in `text`, without the punctuation after them."""
    folded = text.casefold()
    patterns = [_URL] if "//" in text or "www" in folded else []
    if DIGIT.search(text):
        patterns.append(_IP)
    for pattern in patterns:
        for m in pattern.finditer(text):
            end = m.start() + len(m.group().rstrip(_TRAILING))
            yield Span("url", m.start(), end, text[m.start() : end])
    for m in _DOMAIN.finditer(text):
        tld, tail = m.group(2).lower(), m.group(3)
        if tld not in _TLDS and tail[:1] not in ("/", "?", "#"):
            continue
        end = m.start() + len(m.group().rstrip(_TRAILING))
        yield Span("url", m.start(), end, text[m.start() : end])


def phones(text: str) -> Iterator[Span]:
    """The phone numbers in `text`: Chinese mobile numbers, and the digit groups `_is_phone`
    takes for one."""
    for m in _CN_MOBILE.finditer(text):
        if not _inside_word(text, m.start(), m.end()):
            yield Span("phone", m.start(), m.end(), m.group())
    for m in _PHONE.finditer(text):
        value = m.group().rstrip(" .-/")
        if value.startswith("(") and ")" not in value:
            value = value[1:]
        start = m.start() + m.group().find(value)
        end = start + len(value)
        if _is_phone(text, value, start, end):
            yield Span("phone", start, end, value)


def _is_phone(text: str, value: str, start: int, end: int) -> bool:
    digits = sum(c.isdigit() for c in value)
    if not 7 <= digits <= 15:
        return False
    before = text[max(0, start - 40) : start]
    after = text[end : end + 12]
    asked = bool(_PHONE_WORD.search(before))
    international = value.startswith(("+", "00", "(+"))
    separated = any(not c.isdigit() for c in value.lstrip("+"))
    if not separated:
        return international or (asked and digits >= 8)
    if _DATE.fullmatch(value) or _IP.fullmatch(value):
        return False
    if _MONEY.search(before[-6:]) or _MONEY.match(after.lstrip()):
        return False
    if not international and not asked and _THOUSANDS.fullmatch(value):
        return False  # 1 299 000, 12.500.000: an amount written in groups of thousands
    return True


def _inside_word(text: str, start: int, end: int) -> bool:
    """Part of a longer run of Latin letters or digits (Chinese text has no spaces to look for)."""
    return bool(
        (start > 0 and re.match(r"[A-Za-z0-9]", text[start - 1]))
        or (end < len(text) and re.match(r"[A-Za-z0-9]", text[end]))
    )
