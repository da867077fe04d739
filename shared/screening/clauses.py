"""What a reply asks or promises, clause by clause: a request for a secret (`asks_for_secrets`),
to "verify your account" (`asks_to_verify`), or a promise only a person may give (`promises`),
in English, German, French, Spanish and Chinese; a "never"/"do not" takes each back.
"""

from __future__ import annotations

import re

from .text import CJK, nfkc

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


def _tail(before: str) -> str:
    """The few words (CJK: characters) just before a position in a clause."""
    before = before[-200:]
    if CJK.search(before[-4:] if before else ""):
        return before[-8:]
    return " ".join(before.split()[-4:])


def _head(after: str) -> str:
    """The few words (CJK: characters) just after a position in a clause."""
    after = after[:200]
    if CJK.search(after[:4]):
        return after[:6]
    return " ".join(after.split()[:3])


def _negated(clause: str, at: int, end: int | None = None) -> bool:
    """Whether a "never"/"not" stands just before the match at `at` (or, given its `end`, just
    after it: "geben Sie Ihr Passwort niemals weiter")."""
    if _NEGATION.search(_tail(clause[:at])):
        return True
    return end is not None and _NEGATION.search(_head(clause[end:])) is not None


def _clauses(text: str) -> list[str]:
    return [c for c in _CLAUSE.split(nfkc(text)) if c.strip()]


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
