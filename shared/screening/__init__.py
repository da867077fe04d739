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

`screener` runs the checks: `weblinks` (links and whether the knowledge vouches for them),
`details` (personal data), `clauses` (requests for secrets, "verify", promises), `quotation`
and `injection` (text addressed to the model), each reading texts as `text` normalises them.
"""

from .screener import conversation_texts, customer_texts, screen
from .weblinks import links

__all__ = ["conversation_texts", "customer_texts", "links", "screen"]
