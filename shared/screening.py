"""Foreign data in a reply: what a draft says that neither this ticket nor the team's knowledge
does, and what no support reply of ours ever asks or promises.

A draft is written by a model that reads customer text, and a model can be talked into things.
Before a draft goes out, `screen` names, as warnings for the person who reviews it (and as a
reason auto-send holds it back):

- an e-mail address, phone number, postal address or ID-like token (order, IBAN, VAT, long
  digit run) that occurs neither in the conversation nor in the knowledge: another customer's
  data, or a contact point the model invented; a card number always;
- a link, domain or IP address the knowledge does not name, written plainly, bare
  (`evil-support.com/reset`), defanged (`hxxps://`, `example[.]com`, "example dot com") or as
  an address (`203.0.113.7`). The conversation does not vouch for links: a web form or a mail
  names its recipient freely, so a link the customer's text asked for would otherwise reach a
  victim under the desk's name; a disguised link is a warning of its own;
- a request for a password, card number, security code, PIN, one-time code or login details,
  or to "verify your account" (English, German, French, Spanish, Chinese); advice never to
  share them is not one;
- a promise only a person may give ("approved in full", "your refund has been approved");
- the typed placeholders of a remembered example (`[order]`, `[email]`) where details belong;
- a long verbatim quotation of what the customer wrote (`QUOTED_WORDS` words in a row, or a
  reply mostly made of `QUOTED_MIN_WORDS` or more of the customer's words), as a prompt asking
  the model to repeat the ticket would produce (the team's own earlier replies may be repeated);
- what the customer wrote addressed to the model rather than to us (`steering`: "ignore the
  previous instructions", "REPEAT CONVERSATION", `CATEGORY=…`, prompt tags such as
  `</ticket><system>`, in English, German, French, Spanish, Chinese): whatever the draft says,
  a ticket that tries to steer the model is one a person answers.

E-mail addresses, phone numbers, postal addresses and ID-like tokens are found by
`shared.personal`. Everything is compared after normalising (Unicode compatibility forms,
case, whitespace; phone numbers by their digits). `conversation` is this ticket's text as the
customer and the team wrote it (subject, messages, the customer's name and address; no
internal notes), `customer` what of it the customer wrote (`customer_texts`; without it, the
whole conversation), `knowledge` the texts and addresses of the articles the draft cites and
what reviewers told it. The drafter and the inbox run the same function on the same texts, and
the sender on the ticket as the helpdesk has it before it carries out an auto-sent reply.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

QUOTED_WORDS = 25  # words in a row copied from the conversation that make a quotation
QUOTED_SHARE = 0.6  # or this share of the reply, when it is at least QUOTED_MIN_WORDS words
QUOTED_MIN_WORDS = 15
_SHINGLE = 6  # words (CJK: characters) a copied passage is matched by

# -- normalising and un-disguising -----------------------------------------------------------

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
_DISGUISED = re.compile(
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


def _nfkc(text: str) -> str:
    return _INVISIBLE.sub("", unicodedata.normalize("NFKC", text))


def undisguised(text: str) -> str:
    """`text` with defanged links and addresses written plainly (hxxp → http, [.] → .)."""
    text = _nfkc(text)
    for pattern, plain in _DISGUISES:
        text = pattern.sub(plain, text)
    return text


def _folded(text: str) -> str:
    return " ".join(_nfkc(text).casefold().split())


# -- links, domains, IP addresses ------------------------------------------------------------

# a label: ASCII, or Latin/Greek/Cyrillic letters (a look-alike domain is still a domain); CJK
# text runs straight into a domain ("请访问evil.com重置"), so CJK never belongs to one
_L = "a-z0-9\u00c0-\u024f\u0370-\u03ff\u0400-\u04ff"
_TLDS = (
    "com net org info biz io co ai app dev xyz online site shop store support help tech top club"
    " live cloud email link click page pro name mobi tv cc ws me website space fun icu vip work"
    " world today news blog art design agency digital network systems solutions services center"
    " company group global finance bank money pay credit loan security services host hosting"
    " download win bid trade review date stream party racing science cam rest bar gdn ltd gmbh"
    " inc llc cyou sbs lol mom quest beauty hair skin bond cfd buzz monster ink tk ml ga cf gq"
    " 中国 公司 网络 在线 网址 网店 商城"
).split()
_FILE_ENDINGS = {"md", "py", "sh", "ps", "rs", "ts", "pl", "js", "cs", "so", "in"}
_DOMAIN = re.compile(
    rf"(?<![{_L}._@/-])((?:[{_L}](?:[{_L}-]{{0,61}}[{_L}])?\.)+"
    rf"([a-z]{{2,24}}|xn--[a-z0-9-]{{2,59}}|中国|公司|网络|在线|网址|网店|商城))"
    rf"(?![{_L}-]|\.[{_L}])"
    r"((?::\d{1,5})?(?:[/?#][^\s<>\"'“”‘’()\[\]{}，。、；：！？》」]*)?)",
    re.IGNORECASE,
)
_SCHEMED = re.compile(
    r"\b(?:https?|ftp|file)://([^\s<>\"'“”‘’()\[\]{}，。、；：！？》」]+)", re.IGNORECASE
)
_IP = re.compile(
    r"(?<![\d.])((?:25[0-5]|2[0-4]\d|1?\d?\d)(?:\.(?:25[0-5]|2[0-4]\d|1?\d?\d)){3})(?![\d]|\.\d)"
    r"((?::\d{1,5})?(?:/[^\s<>\"'“”‘’()\[\]{}，。、；：！？]*)?)"
)
# each pattern starts where a run of its characters starts: a reply is model output, and a
# pattern retried at every character of a 40 000-character run would take minutes
_EMAIL = re.compile(
    rf"(?<![{_L}._%+-])[{_L}._%+-]{{1,64}}@((?:[{_L}-]{{1,63}}\.){{1,8}}[a-z]{{2,24}})",
    re.IGNORECASE,
)
_TRAILING = ".,;:!?)]}'\"…"


@dataclass(frozen=True)
class Link:
    host: str  # lower-case, without www.
    path: str  # without the trailing slash; "" for the host alone

    def __str__(self) -> str:
        return self.host + self.path


def _link(host: str, rest: str) -> Link:
    host = host.casefold().rstrip(".")
    if host.startswith("www."):
        host = host[4:]
    path = rest.rstrip(_TRAILING)
    path = re.sub(r"^:\d+", "", path).rstrip("/")
    return Link(host, path)


def _known_tld(tld: str, rest: str) -> bool:
    tld = tld.casefold()
    if tld in _TLDS or tld.startswith("xn--"):
        return True
    return len(tld) == 2 and tld.isascii() and (tld not in _FILE_ENDINGS or bool(rest))


def links(text: str) -> list[Link]:
    """The links, bare domains and IP addresses in `text` (undisguised first), in order; the
    addresses a link's query names too (`site.com/go?to=evil.io`)."""
    return list(_links(text))


@functools.lru_cache(maxsize=4096)  # the knowledge passages are read for every draft
def _links(text: str) -> tuple[Link, ...]:
    text = undisguised(text)
    found: list[Link] = []
    masked = text
    for m in _SCHEMED.finditer(text):
        target = m.group(1).rstrip(_TRAILING)
        hostpart, sep, rest = target.partition("/")
        hostpart = hostpart.rsplit("@", 1)[-1]  # user@host: the host is what is visited
        hostpart = re.sub(r":\d+$", "", hostpart)
        found.append(_link(hostpart, sep + rest if sep else ""))
        found += _inner(rest)
        masked = masked.replace(m.group(0), " " * len(m.group(0)), 1)
    masked = _EMAIL.sub(lambda m: " " * len(m.group(0)), masked)
    for m in _IP.finditer(masked):
        found.append(_link(m.group(1), m.group(2)))
    for m in _DOMAIN.finditer(masked):
        if _known_tld(m.group(2), m.group(3)):
            found.append(_link(m.group(1), m.group(3)))
            found += _inner(m.group(3))
    return tuple(dict.fromkeys(found))


def _inner(rest: str) -> list[Link]:
    """Addresses inside a link's path or query."""
    if not rest or "." not in rest:
        return []
    return [
        _link(m.group(1), m.group(3))
        for m in _DOMAIN.finditer(re.sub(r"[/?#=&%]", " ", rest))
        if _known_tld(m.group(2), m.group(3)) and m.group(2).casefold() in _TLDS
    ]


def _hosts_of_addresses(text: str) -> list[Link]:
    return [_link(m.group(1), "") for m in _EMAIL.finditer(undisguised(text))]


# Where anyone can have a site of their own under a name (a subdomain, or a path): two
# addresses there are the same site only when they are the same address.
_SHARED_HOSTS = frozenset(
    """github.io blogspot.com herokuapp.com netlify.app vercel.app pages.dev web.app
    firebaseapp.com azurewebsites.net cloudfront.net amazonaws.com wordpress.com wixsite.com
    sharepoint.com ngrok.io ngrok-free.app glitch.me repl.co workers.dev onrender.com fly.dev
    myshopify.com carrd.co notion.site webflow.io weebly.com squarespace.com
    """.split()
)
_PATH_HOSTS = frozenset(
    """github.com gitlab.com bitbucket.org docs.google.com drive.google.com sites.google.com
    forms.gle bit.ly tinyurl.com t.co goo.gl ow.ly is.gd dropbox.com 1drv.ms onedrive.live.com
    youtube.com youtu.be facebook.com instagram.com twitter.com x.com linkedin.com medium.com
    notion.so typeform.com forms.office.com paypal.me wa.me t.me linktr.ee
    """.split()
)
_SECOND_LEVEL = frozenset("co com net org gov ac edu ne or gob".split())
_PRIVATE_IP = re.compile(r"^(?:10|127)\.|^192\.168\.|^172\.(?:1[6-9]|2\d|3[01])\.")


def _site(host: str) -> str:
    """The name a host's owner registered (`help.shop.com` → `shop.com`, `a.shop.co.uk` →
    `shop.co.uk`); the host itself for an IP address or on a shared host."""
    if re.fullmatch(r"[\d.]+", host):
        return host
    labels = host.split(".")
    for n in (3, 2):
        suffix = ".".join(labels[-n:])
        if len(labels) > n and suffix in _SHARED_HOSTS:
            return ".".join(labels[-n - 1 :])
    if len(labels) >= 3 and labels[-2] in _SECOND_LEVEL and len(labels[-1]) == 2:
        return ".".join(labels[-3:])
    return ".".join(labels[-2:])


def _vouched(link: Link, known: Sequence[Link]) -> bool:
    """Whether the knowledge names `link`'s site: any page of a site it names (the team's own
    domain, any subdomain), on a host where anyone has pages only the page or below it."""
    for k in known:
        if link.host in _PATH_HOSTS or k.host in _PATH_HOSTS:
            if link.host == k.host and (
                link.path.casefold() == k.path.casefold()
                or (k.path and link.path.casefold().startswith(k.path.casefold() + "/"))
            ):
                return True
        elif _site(link.host) == _site(k.host):
            return True
    return False


def _defanged(link: Link) -> str:
    """A link as a warning names it: readable, never live (warnings reach chat and mail)."""
    return str(link).replace(".", "[.]").replace("://", "[://]")[:80]


# -- personal data ----------------------------------------------------------------------------

_LABELS = {
    "email": "an e-mail address",
    "phone": "a phone number",
    "address": "a postal address",
    "iban": "an IBAN",
    "vat": "a VAT number",
    "order": "an order number",
    "number": "a long number",
    "card": "a card number",
}


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text)


def _alnum(text: str) -> str:
    return re.sub(r"[^0-9a-z]", "", _nfkc(text).casefold())


def _same_phone(a: str, b: str) -> bool:
    """Two numbers by their digits: equal, or one the other with a country/trunk prefix."""
    a, b = a.lstrip("0"), b.lstrip("0")
    short, long_ = sorted((a, b), key=len)
    return len(short) >= 7 and long_.endswith(short)


_DIGIT_RUN = re.compile(r"\+?\d[\d\s().\-/]{5,}\d")


def _personal(text: str) -> tuple[Any, ...]:
    return _spans(text)


@functools.lru_cache(maxsize=4096)
def _spans(text: str) -> tuple[Any, ...]:
    """`shared.personal.spans`, kept for the texts screened again and again: the same knowledge
    passages and conversation for every draft of a ticket, at the drafter, inbox and sender."""
    from shared import personal

    return tuple(personal.spans(text))


def _hint(kind: str, value: str) -> str:
    """Enough of a value for the reviewer to find it in the reply, not the whole of it."""
    if kind == "email":
        local, _, domain = value.partition("@")
        return f"{local[:1]}…@{domain}"
    digits = _digits(value)
    if kind in ("phone", "card", "iban", "number") and len(digits) >= 4:
        return f"ending {digits[-4:]}"
    return value[:2] + "…" if len(value) > 3 else "…"


def _known_address(value: str, allowed_tokens: set[str]) -> bool:
    """An address is the same when its numbers and most of its words (CJK: characters) are in
    the allowed texts: "Lindenstr. 14, Berlin" and "Lindenstraße 14 in 10115 Berlin" are one,
    "221 Baker Street" and "12 Baker Street" are not."""
    tokens = _tokens(value)
    if not tokens:
        return True
    numbers = [t for t in tokens if t.isdigit()]
    if any(n not in allowed_tokens for n in numbers):
        return False
    return sum(t in allowed_tokens for t in tokens) >= 0.75 * len(tokens)


def _foreign_personal(reply: str, allowed: Sequence[str]) -> list[str]:
    warnings: list[str] = []
    folded_allowed = _folded("\n".join(allowed))
    alnum_allowed = [_alnum(t) for t in allowed]
    phones_allowed = [_digits(m.group(0)) for t in allowed for m in _DIGIT_RUN.finditer(t)]
    phones_allowed += [_digits(s.text) for t in allowed for s in _personal(t) if s.kind == "phone"]
    allowed_tokens = {t for text in allowed for t in _tokens(text)}
    seen: set[tuple[str, str]] = set()
    for span in _personal(undisguised(reply)):
        kind, value = span.kind, span.text
        if kind not in _LABELS or (kind, value) in seen:
            continue
        seen.add((kind, value))
        label = _LABELS[kind]
        if kind == "card":
            warnings.append(f"the reply contains a card number ({_hint(kind, value)})")
            continue
        if kind == "email":
            known = value.casefold() in folded_allowed
        elif kind == "phone":
            digits = _digits(value)
            known = any(_same_phone(digits, p) for p in phones_allowed if p)
        elif kind == "address":
            known = _known_address(value, allowed_tokens)
        else:
            token = _alnum(value)
            known = not token or any(token in a for a in alnum_allowed)
        if not known:
            warnings.append(
                f"the reply contains {label} ({_hint(kind, value)}) that is neither in this"
                " conversation nor in the cited knowledge"
            )
    return warnings


# what `shared.personal.redact` leaves in the examples a draft is shown
_PLACEHOLDER = re.compile(
    r"\[(?:email|phone|url|address|iban|vat|card|order|number|name)\]", re.IGNORECASE
)


# -- requests for secrets, "verify your account", promises --------------------------------------

_CREDENTIAL = re.compile(
    r"passwor[dt]s?|pass ?codes?|passphrases?|\bpins?\b|pin[- ]?codes?|pin[- ]?nummer"
    r"|(?:credit|debit|bank)?\s?card(?:'s)? (?:numbers?|details|data|info(?:rmation)?)"
    r"|(?:numbers?|digits) (?:on|of|from) (?:your|the) (?:credit |debit |bank )?card"
    r"|\bcvv2?\b|\bcvc2?\b|\bcsc\b|security code|card verification"
    r"|(?:verification|security|confirmation|authentication|login|sign-in|sms|text|one[- ]time"
    r"|2fa|otp|access|activation|auth|six[- ]digit|6[- ]digit)[- ]codes?|\botps?\b|(?-i:\bTANs?\b)"
    r"|codes? (?:that |which )?(?:you (?:have )?(?:just )?(?:received|got)|(?:we"
    r"|was) (?:just )?sent)"
    r"|login (?:details|credentials|data)|credentials|sign-in details|security (?:questions?"
    r"|answers?)"
    r"|maiden name|online banking"
    r"|\b(?:codes?|código|codigo|code)\b[^.;:]{0,40}\b(?:sms|text message|mensaje de texto)\b"
    # German
    r"|kennw[oö]rt(?:er)?|geheimzahl|(?:kredit)?kartennummer|kartendaten|kartenprüf\w*|prüfziffer"
    r"|sicherheitscode|bestätigungscode|verifizierungscode|einmal(?:code|passwort|kennwort)"
    r"|sms-code|zugangsdaten|anmeldedaten|login-daten"
    # French
    r"|mot de passe|mots de passe|code (?:pin|secret|confidentiel|de (?:sécurité|vérification"
    r"|confirmation|validation))|numéro de (?:votre |la )?carte|données (?:de|bancaires)"
    r"|cryptogramme|identifiants"
    # Spanish
    r"|contraseñas?|clave(?: de acceso)?|número de (?:su |la |tu )?tarjeta|datos de (?:la "
    r"|su )?tarjeta"
    r"|código (?:de (?:seguridad|verificación|confirmación|acceso)|pin|secreto)|credenciales"
    # Chinese
    r"|密码|口令|验证码|校验码|动态码|安全码|卡号|银行卡号|信用卡号|cvv码|有效期|支付密码|登录凭证",
    re.IGNORECASE,
)
_ASKING = re.compile(
    r"\bsend (?:us|me|it|them|over|back|across)\b|^\W*(?:please\s+)?(?:kindly\s+)?send\b"
    r"|\bplease\s+(?:\w+\s+){0,2}?send\b|\bjust send\b"
    r"|\breply (?:to (?:this|our) (?:e-?mail|message) )?with\b|\brespond with\b|\btell (?:us|me)\b"
    r"|\bgive (?:us|me)\b|\bprovide\b|\bshare\b|\bread (?:out|us|me|it|them)\b|\bsay\b"
    r"|\blet (?:us|me) (?:know|have)\b|\bconfirm\b|\bverify\b|\bsubmit\b|\bforward\b"
    r"|\b(?:we|i)(?:'ll| will| would| do| still)? (?:need|require)\b|\b(?:is|are) (?:needed"
    r"|required)\b"
    r"|\bask(?:s|ed|ing)? (?:you )?for\b|\bwhat(?:'s| is| are) (?:your|the)\b|\btext (?:us|me)\b"
    r"|\bin (?:your|the|this) (?:reply|answer|response|e-?mail|chat)\b|\bwrite (?:it"
    r"|them) (?:down|back)\b"
    r"|\bmust (?:give|provide|send|tell)\b|\bcall\b.{0,30}\b(?:with|and (?:give|read|tell|say))\b"
    r"|\b(?:have|with|keep) (?:your|the) [\w' -]{1,30} (?:ready|at hand|to hand)\b"
    r"|\b(?:team|department|agent|colleague|we|i)\s+(?:\w+\s+)?(?:needs?|requires?)\b"
    # German
    r"|\b(?:senden|schicken|nennen|teilen|geben|übermitteln|bestätigen|diktieren|antworten|lesen)"
    r"\s+sie\b|\bmitteilen\b|\bdurchgeben\b|\bvorlesen\b|\bangeben\b|\bzu nennen\b"
    r"|\bwie lautet\b|\b(?:wir )?(?:benötigen|brauchen) wir\b|\bwir (?:benötigen|brauchen)\b"
    # French
    r"|\b(?:envoyez|envoyer|renvoyez|communiquez|communiquer|indiquez|indiquer|donnez|donner"
    r"|fournissez|fournir|transmettez|transmettre|confirmez|confirmer|précisez|préciser|répondez"
    r"|dites|dictez|lisez)\b|\bavons besoin\b|\bquel est\b"
    # Spanish
    r"|\b(?:envíe|envíenos|envíeme|enviarnos|mande|mándenos|proporcione|proporciónenos"
    r"|facilite|facilítenos|indique|indíquenos|comunique|comuníquenos|díganos|dígame|díctenos"
    r"|escriba|confirme|necesitamos|responda con)\b|\bcuál es\b"
    # Chinese
    r"|发给我们|发送给我们|发到|告诉我们|告知我们|提供给我们|提供|请告诉|请发送|请回复|回复您的|回复你的"
    r"|报给|念给|读给|透露|索取|需要您的|需要你的|请把|请将|请输入|发一下|发过来|发我们|报一下|说一下",
    re.IGNORECASE | re.MULTILINE,
)
_NEGATION = re.compile(
    r"\b(?:never|not|don'?t|doesn'?t|won'?t|no one|nobody|under no circumstances|no need|neither"
    r"|nor|nie|niemals|nicht|keinesfalls|kein(?:e|en|er)?|niemand|jamais|ne|n'|aucun\w*|personne"
    r"|nunca|jamás|no|ningún|nadie)\b|n'|不会|绝不|决不|从不|从来不|不要|请勿|切勿|勿|不得|不能|别|永远不|无需|不需要",
    re.IGNORECASE,
)
# phrases that look negative and are not ("don't hesitate to send us your PIN")
_NOT_NEGATION = re.compile(
    r"\b(?:don'?t|do not) (?:hesitate|forget|delay|wait)\b|\bnever mind\b|\bnot to worry\b"
    r"|\bno problem\b|\bkein problem\b|\bzögern sie nicht\b|\bvergessen sie nicht\b"
    r"|\bnicht vergessen\b|n'hésitez pas|n'oubliez pas|\bno dude\b|\bno olvide\b|\bno se olvide\b"
    r"|不要忘记|别忘了|不要犹豫",
    re.IGNORECASE,
)
_VERIFY = re.compile(
    r"\b(?:verify|confirm|validate|re-?confirm|re-?validate|authenticate|unlock|reactivate)"
    r"\s+(?:your|the)\s+(?:\w+\s+)?(?:account|identity|login|credentials|card|payment"
    r" (?:details|information|method)|billing (?:details|information)|bank (?:details|account))"
    r"|(?:bestätigen|verifizieren|validieren|entsperren)\s+sie\s+ihr\w*\s+(?:\w+\s+)?(?:konto"
    r"|kundenkonto"
    r"|identität|zugang\w*|zahlungs\w*)|\bihr\w* (?:konto|kundenkonto"
    r"|identität)\s+(?:zu\s+)?(?:bestätigen|verifizieren)"
    r"|(?:vérifi|confirm|valid|débloqu|réactiv)\w*\s+(?:votre|vos)\s+(?:compte|identité"
    r"|identifiants|coordonnées bancaires)"
    r"|(?:verifi|confirm|valid|desbloque|reactiv)\w*\s+(?:su|tu)\s+(?:cuenta|identidad"
    r"|credenciales|datos bancarios)"
    r"|(?:验证|核实|确认|激活|解锁)(?:一下)?(?:您|你)的?(?:账户|账号|帐户|帐号|身份|银行卡)"
    r"|(?:account|konto|compte|cuenta) (?:will be|wird|sera|será) (?:\w+ ){0,2}"
    r"(?:suspended|closed|locked|deleted|gesperrt|geschlossen|suspendu|bloqué|fermé|suspendida"
    r"|bloqueada|cerrada)"
    r"|账户将被(?:冻结|关闭|停用)|账号将被(?:冻结|关闭|停用)",
    re.IGNORECASE,
)
_WE = re.compile(
    r"\b(?:we|our team|wir|nous|nosotros|vamos a|podemos|we'll|we've)\b(?:\W+\w+){0,3}\W*$"
    r"|我们[^，。]{0,4}$",
    re.IGNORECASE,
)
_PROMISE = re.compile(
    r"\bapproved in full\b|\bfully (?:approved|refunded|reimbursed)\b"
    r"|\b(?:refund|reimbursement|claim|compensation|chargeback) (?:fully )?(?:approved|granted)\b"
    r"|\b(?:refund|reimbursement|claim|compensation|chargeback|credit)\s+(?:request\s+)?"
    r"(?:has been|have been|is|was|got|will be)\s+(?:\w+\s+)?(?:approved|granted|authori[sz]ed"
    r"|accepted)\b"
    r"|\bwe(?:'ve| have)?\s+(?:\w+\s+)?(?:approved|granted|authori[sz]ed)\s+(?:your|a"
    r"|the)\s+(?:full\s+)?"
    r"(?:refund|claim|compensation|reimbursement)\b|\b(?:full|100 ?%) refund (?:has been|is|was"
    r"|will be)"
    r"|\bguarantee(?:d)? (?:you )?(?:a )?(?:full )?refund"
    r"|\b(?:erstattung|rückerstattung|entschädigung)\s+(?:wurde|ist"
    r"|wird)\s+(?:\w+\s+){0,3}(?:genehmigt|bewilligt|freigegeben)"
    r"|\bin voller höhe (?:erstattet|genehmigt|zurückerstattet)|\bvollständig (?:erstattet"
    r"|zurückerstattet)"
    r"|\bremboursement\s+(?:intégral\s+)?(?:a été|est|sera)\s+(?:\w+\s+)?(?:approuvé|accepté"
    r"|validé|accordé)"
    r"|\bintégralement rembours\w*|\brembours\w* (?:en totalité|intégralement)"
    r"|\breembolso\s+(?:completo\s+)?(?:ha sido|fue|está|será)\s+(?:\w+\s+)?(?:aprobado|aceptado"
    r"|concedido|autorizado)"
    r"|\breembols\w* (?:en su totalidad|íntegramente|por completo)"
    r"|退款(?:申请)?已(?:经)?(?:被)?(?:批准|通过|审批通过|同意)|已(?:经)?(?:批准|同意)(?:了)?(?:您|你)?的?(?:全额)?退款"
    r"|全额退款已",
    re.IGNORECASE,
)
_CLAUSE = re.compile(r"[.!?;\n。！？；]+\s*")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]")


def _tail(before: str) -> str:
    """The few words (CJK: characters) just before a position in a clause."""
    before = before[-200:]
    if _CJK.search(before[-4:] if before else ""):
        return before[-8:]
    return " ".join(before.split()[-4:])


def _head(after: str) -> str:
    """The few words (CJK: characters) just after a position in a clause."""
    after = after[:200]
    if _CJK.search(after[:4]):
        return after[:6]
    return " ".join(after.split()[:3])


def _negated(clause: str, at: int, end: int | None = None) -> bool:
    """Whether a "never"/"not" stands just before the match at `at` (or, given its `end`, just
    after it: "geben Sie Ihr Passwort niemals weiter")."""
    if _NEGATION.search(_tail(clause[:at])):
        return True
    return end is not None and _NEGATION.search(_head(clause[end:])) is not None


def _clauses(text: str) -> list[str]:
    return [c for c in _CLAUSE.split(_nfkc(text)) if c.strip()]


def asks_for_secrets(reply: str) -> bool:
    """Whether some clause asks the customer for a secret, and no "never"/"do not" takes it back."""
    for clause in _clauses(reply):
        cleaned = _NOT_NEGATION.sub(lambda m: "_" * len(m.group(0)), clause)
        secrets = [
            m for m in _CREDENTIAL.finditer(cleaned) if not _negated(cleaned, m.start(), m.end())
        ]
        asks = [m for m in _ASKING.finditer(cleaned) if not _negated(cleaned, m.start())]
        if secrets and asks:
            return True
    return False


def asks_to_verify(reply: str) -> bool:
    for clause in _clauses(reply):
        cleaned = _NOT_NEGATION.sub(lambda m: "_" * len(m.group(0)), clause)
        for m in _VERIFY.finditer(cleaned):
            before = cleaned[max(0, m.start() - 80) : m.start()]
            if not _negated(cleaned, m.start()) and not _WE.search(before):
                return True
    return False


_CONDITION = re.compile(
    r"\b(?:if|once|when|whether|after|as soon as|until|unless|sobald|wenn|falls|ob|nachdem|si"
    r"|une fois"
    r"|dès que|lorsque|quand|cuando|una vez|en cuanto|hasta que)\b|一旦|如果|若|待|等到|是否",
    re.IGNORECASE,
)


def promises(reply: str) -> list[str]:
    """The promises of an outcome in `reply` (not those it makes conditional or denies)."""
    found = []
    for clause in _clauses(reply):
        for m in _PROMISE.finditer(clause):
            before = clause[: m.start()]
            if not _negated(clause, m.start()) and not _CONDITION.search(before):
                found.append(" ".join(m.group(0).split()))
    return list(dict.fromkeys(found))


# -- quotation --------------------------------------------------------------------------------

_TOKEN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]|[^\W_]+", re.UNICODE)


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(_nfkc(text).casefold())


def _weight(token: str) -> float:
    return 0.5 if _CJK.match(token) else 1.0  # two CJK characters are about a word


def _shingles(texts: Iterable[str]) -> set[tuple[str, ...]]:
    found: set[tuple[str, ...]] = set()
    for text in texts:
        tokens = _tokens(text)
        found.update(tuple(tokens[i : i + _SHINGLE]) for i in range(len(tokens) - _SHINGLE + 1))
    return found


def quoted(reply: str, conversation: Sequence[str], knowledge: Sequence[str] = ()) -> float:
    """How many of the conversation's words the reply quotes (CJK: two characters a word; what
    the knowledge says too does not count) when that is a quotation: a run of `QUOTED_WORDS`
    copied word for word, or a reply mostly made of copied words; 0 when it is none."""
    tokens = _tokens(reply)
    if len(tokens) < _SHINGLE:
        return 0.0
    said, known = _shingles(conversation), _shingles(knowledge)
    copied = [False] * len(tokens)
    for i in range(len(tokens) - _SHINGLE + 1):
        shingle = tuple(tokens[i : i + _SHINGLE])
        if shingle in said and shingle not in known:
            for j in range(i, i + _SHINGLE):
                copied[j] = True
    longest = run = 0.0
    for token, hit in zip(tokens, copied, strict=True):
        run = run + _weight(token) if hit else 0.0
        longest = max(longest, run)
    total = sum(_weight(t) for t in tokens)
    words = sum(_weight(t) for t, hit in zip(tokens, copied, strict=True) if hit)
    if longest >= QUOTED_WORDS:
        return longest
    if words >= QUOTED_MIN_WORDS and words >= QUOTED_SHARE * total:
        return words
    return 0.0


# -- text addressed to the model -------------------------------------------------------------

_TAGS = "system|assistant|user|developer|ticket|conversation|knowledge|examples|instructions"
_STEERING = re.compile(
    "|".join(
        (
            # English
            r"\b(?:ignore|disregard|forget|override)\b.{0,30}\b(?:previous|prior|above|earlier|"
            r"all|your|the|any)\b.{0,20}\b(?:instructions?|prompts?|rules|directions|guidelines)\b",
            r"\brepeat\s+(?:the\s+|all\s+|your\s+)?(?:examples?|conversation|prompt|"
            r"everything|system)\b|\brepeat\s+your\s+instructions\b",
            r"\b(?:system|developer)\s+(?:prompt|message|instructions?)\b",
            r"\bcategory\s*[=:]\s*[a-z]+",
            r"\b(?:you are now|from now on you|act as (?:an?|the) (?:ai|assistant|model)|"
            r"new instructions?|jailbreak|developer mode|dan mode)\b",
            r"\badd this link\b|\bask (?:me |them |the customer )?for (?:the |my |their )?"
            r"(?:card|password|pin|cvv)",
            r"\b(?:as|to) (?:the|an?) (?:ai|language model|llm)\b",
            # prompt markup
            r"</?\s*(?:" + _TAGS + r")\s*>",
            r"<\|im_(?:start|end)\|>|\[/?INST\]|<<SYS>>",
            # German, French, Spanish
            r"\b(?:ignorier|vergiss)\w*\b.{0,30}\b(?:anweisungen|instruktionen|vorgaben|regeln)\b",
            r"\b(?:ignore[zr]?|oublie[zr]?)\b.{0,30}\b(?:instructions|consignes|règles)\b",
            r"\b(?:ignora|olvida)\w*\b.{0,30}\b(?:instrucciones|indicaciones|reglas)\b",
        )
    ),
    re.IGNORECASE | re.DOTALL,
)
_STEERING_ZH = (
    "忽略之前",
    "忽略以上",
    "忽略所有",
    "忽略前面",
    "无视之前",
    "系统提示",
    "重复所有",
    "提示词",
)


def steering(texts: Iterable[str]) -> list[str]:
    """What in the customer's `texts` is addressed to the model, each once, in order: a ticket
    that tries to instruct the model is answered by a person, whatever the draft says."""
    found: list[str] = []
    for text in texts:
        plain = _nfkc(text)
        found += [" ".join(m.group(0).split())[:60] for m in _STEERING.finditer(plain)]
        found += [word for word in _STEERING_ZH if word in plain]
    return list(dict.fromkeys(found))


# -- the screen ---------------------------------------------------------------------------------


def screen(
    reply: str,
    *,
    conversation: Sequence[str] = (),
    knowledge: Sequence[str] = (),
    customer: Sequence[str] | None = None,
) -> list[str]:
    """The warnings a reply earns (empty: nothing foreign in it). See the module's docstring."""
    warnings: list[str] = []
    known_links = [k for text in knowledge for k in (*links(text), *_hosts_of_addresses(text))]
    said = "\n".join(conversation)
    foreign = [
        link
        for link in links(reply)
        if not _vouched(link, known_links)
        # the customer's own network named back to them; with a path or port it is a link
        and not (_PRIVATE_IP.match(link.host) and not link.path and link.host in said)
    ]
    if foreign:
        warnings.append(
            "the reply links to an address the cited knowledge does not name: "
            + ", ".join(_defanged(link) for link in foreign[:5])
        )
    if _DISGUISED.search(_nfkc(reply)):
        warnings.append("the reply writes a link or address in disguise (hxxp, [.], (at), dot)")
    warnings += _foreign_personal(reply, [*conversation, *knowledge])
    holes = list(dict.fromkeys(m.group(0) for m in _PLACEHOLDER.finditer(reply)))
    if holes:
        warnings.append(
            "the reply has the placeholders of a remembered example where details belong: "
            + ", ".join(holes[:5])
        )
    if asks_for_secrets(reply):
        warnings.append(
            "the reply asks for a password, card number, security code, PIN or one-time code;"
            " we never ask for those"
        )
    if asks_to_verify(reply):
        warnings.append('the reply asks the customer to "verify" an account or identity')
    promised = promises(reply)
    if promised:
        warnings.append(
            "the reply promises what only a person may decide: "
            + ", ".join(repr(p) for p in promised[:3])
        )
    words = quoted(reply, conversation if customer is None else customer, knowledge)
    if words:
        warnings.append(f"the reply quotes about {int(words)} words of the conversation verbatim")
    steered = steering(customer or ())
    if steered:
        warnings.append(
            "the customer's text is addressed to the model, not to us: "
            + ", ".join(repr(s) for s in steered[:3])
            + "; a person answers it"
        )
    return warnings


def customer_texts(
    subject: str | None, customer: Mapping[str, Any] | None, messages: Iterable[Mapping[str, Any]]
) -> list[str]:
    """What `screen` takes as what the customer wrote: the subject, the customer's name, and the
    bodies of the customer's messages."""
    texts = [str(subject or ""), str((customer or {}).get("name") or "")]
    texts += [str(m.get("body") or "") for m in messages if m.get("author") == "customer"]
    return [t for t in texts if t]


def conversation_texts(
    subject: str | None, customer: Mapping[str, Any] | None, messages: Iterable[Mapping[str, Any]]
) -> list[str]:
    """What `screen` takes as the conversation: the subject, the customer's name and e-mail
    address, and the messages' bodies (internal notes left out: they are not for the customer)."""
    texts = [str(subject or "")]
    texts += [str((customer or {}).get(k) or "") for k in ("name", "email")]
    texts += [str(m.get("body") or "") for m in messages if m.get("author") != "note"]
    return [t for t in texts if t]
