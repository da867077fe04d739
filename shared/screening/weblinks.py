"""Links, bare domains and IP addresses in a text (`links`), however they are written, and
whether the cited knowledge names the site a link leads to (`vouched`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from .text import undisguised

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


def hosts_of_addresses(text: str) -> list[Link]:
    """The domains of the e-mail addresses in `text` (undisguised first), as links."""
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
PRIVATE_IP = re.compile(r"^(?:10|127)\.|^192\.168\.|^172\.(?:1[6-9]|2\d|3[01])\.")


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


def vouched(link: Link, known: Sequence[Link]) -> bool:
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


def defanged(link: Link) -> str:
    """A link as a warning names it: readable, never live (warnings reach chat and mail)."""
    return str(link).replace(".", "[.]").replace("://", "[://]")[:80]
