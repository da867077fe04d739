"""The demo helpdesk: 30 customers and 41 tickets (T1001..T1041) of a small online shop and app.

Fixed data, so demos and tests are deterministic. Each ticket's conversation starts with the
customer's opening message (`<ticket>-m1`, the ticket's `body`); later messages (scripted in
`demo_conversations`) are numbered on (`-m2`, `-m3`, …), and the newest one's time is the
ticket's `updated_at` (except T1012).

Landmarks other code and tests rely on:

- T1003 a bug report (open), T1012 a duplicate charge (open, ONE customer message only), T1027
  the one that mentions a lawyer (open; in the customer's opening message), T1033 the one
  written in Chinese, T1040 the only closed ticket (its last message an agent's), T1041 an
  invoice question (open, one message).
- An open round after an agent reply (agent answered, the customer wrote again): T1003, T1014,
  T1019, T1021, T1022, T1026, T1034, T1036, T1039.
- An open round of two customer messages with no reply yet: T1004 (an internal note between
  them), T1009, T1020, T1023, T1031, T1035, T1037.
- Internal notes: T1004, T1015 and T1027 (the note is their newest message).
- Waiting on the customer (status `pending`, the last message an agent's): T1001, T1006, T1008
  (two agent messages in a row), T1011, T1016, T1018, T1024, T1029 — every pending ticket.
- Seven tickets still open or pending were last updated before 2026-11-08, 20 days before
  2026-11-28 (stale): T1002, T1005, T1007, T1010, T1011 (waiting on the customer), T1013, T1017.
- T1019 and T1020 share an `updated_at` (a tie for paging).
"""

from __future__ import annotations

import datetime as dt

from .base import Customer, Message, Priority, Ticket, TicketStatus, opening_message_id
from .demo_conversations import LATER_MESSAGES


def _at(text: str) -> dt.datetime:
    """`"2026-10-12 09:14"` as an aware UTC datetime."""
    return dt.datetime.strptime(text, "%Y-%m-%d %H:%M").replace(tzinfo=dt.UTC)


CUSTOMERS: tuple[Customer, ...] = tuple(
    Customer(id=f"C{n:03d}", name=name, email=email)
    for n, (name, email) in enumerate(
        [
            ("Emma Schneider", "emma.schneider@example.com"),
            ("Liam O'Connor", "liam.oconnor@example.org"),
            ("Sofía García", "sofia.garcia@example.net"),
            ("Kenji Watanabe", "kenji.watanabe@example.com"),
            ("Amara Okafor", "amara.okafor@example.org"),
            ("Lukas Nowak", "lukas.nowak@example.com"),
            ("Chloé Dubois", "chloe.dubois@example.net"),
            ("Mateus Oliveira", "mateus.oliveira@example.com"),
            ("Priya Raman", "priya.raman@example.org"),
            ("Jonas Lindqvist", "jonas.lindqvist@example.net"),
            ("Fatima Al-Sayed", "fatima.alsayed@example.com"),
            ("Daniel Murphy", "dan.murphy@example.com"),
            ("Ingrid Halvorsen", "ingrid.halvorsen@example.org"),
            ("Mehmet Yılmaz", "mehmet.yilmaz@example.net"),
            ("Olivia Bennett", "olivia.bennett@example.com"),
            ("Tomás Herrera", "tomas.herrera@example.org"),
            ("李娜", "li.na@example.com"),
            ("Aleksandra Kowalczyk", "a.kowalczyk@example.net"),
            ("Noah Fischer", "noah.fischer@example.com"),
            ("Yuki Tanaka", "yuki.tanaka@example.org"),
            ("Giulia Romano", "giulia.romano@example.net"),
            ("Samuel Adeyemi", "samuel.adeyemi@example.com"),
            ("Hannah Weiß", "hannah.weiss@example.org"),
            ("Arjun Mehta", "arjun.mehta@example.net"),
            ("Élodie Martin", "elodie.martin@example.com"),
            ("Dmitri Volkov", "dmitri.volkov@example.org"),
            ("Grace Kim", "grace.kim@example.net"),
            ("Pedro Santos", "pedro.santos@example.com"),
            ("Nora Haddad", "nora.haddad@example.org"),
            ("Björn Eriksson", "bjorn.eriksson@example.net"),
        ],
        start=1,
    )
)

_BY_ID = {c.id: c for c in CUSTOMERS}

# id, customer, subject, body, status, priority, created_at, updated_at
_ROWS: list[tuple[str, str, str, str, TicketStatus, Priority, str, str]] = [
    ("T1001", "C001", "Refund for annual plan",
     "Hi, I upgraded to the annual plan by mistake last night instead of the monthly one. "
     "Could you refund the difference and switch me back to monthly? Thanks, Emma",
     "pending", "normal", "2026-10-12 09:14", "2026-11-12 10:02"),
    ("T1002", "C002", "Can't export to CSV",
     "The CSV export on the Reports page just spins forever and never downloads anything. "
     "I tried Chrome and Firefox. It worked fine last week.",
     "open", "normal", "2026-10-12 15:40", "2026-10-12 15:40"),
    ("T1003", "C003", "App crashes when I upload a photo",
     "Every time I try to upload a product photo from my phone the app closes immediately. "
     "I'm on Android 15 with app version 4.2.1. I've reinstalled it twice already.",
     "open", "high", "2026-10-14 08:05", "2026-11-18 15:20"),
    ("T1004", "C004", "VAT number missing from invoice",
     "Our company VAT number is missing from invoice INV-2026-0412. Our accounting team can't "
     "book it without it. Could you reissue the invoice with the VAT number included?",
     "open", "normal", "2026-10-15 02:31", "2026-11-14 09:45"),
    ("T1005", "C005", "Password reset email never arrives",
     "I requested a password reset three times today and nothing has arrived, not even in "
     "spam. Can you check whether my address is blocked?",
     "open", "high", "2026-10-16 18:22", "2026-10-16 18:22"),
    ("T1006", "C006", "Charged twice for order #58213",
     "My card was charged twice for the same order (#58213), both 49.90 EUR on 17 October. "
     "Please refund one of them.",
     "pending", "high", "2026-10-17 10:03", "2026-11-10 14:12"),
    ("T1007", "C007", "Do you ship to Switzerland?",
     "Do you ship to Switzerland, and if so, are customs fees included in the price?",
     "open", "low", "2026-10-18 12:47", "2026-10-18 12:47"),
    ("T1008", "C008", "Locked out after changing phone (2FA)",
     "I got a new phone and my authenticator codes are gone, so I can't log in anymore. "
     "I still have access to my email but no recovery codes. We're running a sale tomorrow, "
     "I really need access today!",
     "pending", "urgent", "2026-10-19 21:15", "2026-11-09 08:30"),
    ("T1009", "C009", "Receipt for my last payment",
     "Could you send me a receipt for the payment I made on October 3rd? "
     "I need it for my expense report.",
     "open", "low", "2026-10-20 09:58", "2026-11-11 10:11"),
    ("T1010", "C010", "Dashboard numbers don't match the export",
     "The revenue on the dashboard says 12,480 but the exported report for the same week says "
     "11,930. Which one is right?",
     "open", "normal", "2026-10-21 16:34", "2026-10-21 16:34"),
    ("T1011", "C011", "Cancel my subscription",
     "Please cancel my subscription at the end of this billing period. "
     "I won't need the service after December.",
     "pending", "normal", "2026-10-22 11:20", "2026-10-23 09:05"),
    ("T1012", "C012", "Charged twice for my subscription",
     "Hi, I was charged twice for my October subscription: two payments of $29.00 on my card "
     "on the same day. Please refund the duplicate charge. Thanks, Dan",
     "open", "high", "2026-10-23 13:42", "2026-11-24 09:30"),
    ("T1013", "C013", "Wrong address on invoices",
     "The billing address on my invoices still shows our old office in Bergen. We moved to Oslo "
     "in September. Can you update it and resend the last two invoices?",
     "open", "normal", "2026-10-24 07:19", "2026-10-24 07:19"),
    ("T1014", "C014", "2FA codes not accepted",
     "The six-digit codes from my authenticator app are always rejected as invalid. "
     "The time on my phone is set automatically.",
     "open", "high", "2026-10-25 19:03", "2026-11-17 08:40"),
    ("T1015", "C015", "Love the new calendar view",
     "Just wanted to say the new calendar view is brilliant, it saves me so much time. "
     "Any plans for a dark mode?",
     "open", "low", "2026-10-26 14:55", "2026-11-09 11:00"),
    ("T1016", "C016", "Refund for a damaged item",
     "The ceramic mug in order #60177 arrived broken. I've attached photos. "
     "I'd like a refund rather than a replacement, please.",
     "pending", "normal", "2026-10-27 10:26", "2026-11-12 15:00"),
    ("T1017", "C018", "PDF export cuts off the last column",
     "When I export the invoice list to PDF, the last column (Total) is cut off on every page. "
     "Switching to landscape doesn't help.",
     "open", "normal", "2026-10-28 08:12", "2026-10-28 08:12"),
    ("T1018", "C019", "Account locked",
     "After a few wrong passwords my account says it's locked for security reasons. "
     "It's been over an hour. How do I unlock it?",
     "pending", "high", "2026-10-29 17:48", "2026-11-10 09:15"),
    ("T1019", "C020", "Receipts in Japanese yen?",
     "Is it possible to get receipts in JPY instead of USD? My company reimburses in yen.",
     "open", "low", "2026-10-30 03:37", "2026-11-16 10:00"),
    ("T1020", "C021", "Order marked delivered but never arrived",
     "Order #61544 was marked as delivered on 28 October but nothing came. "
     "The neighbours haven't seen it either.",
     "open", "normal", "2026-10-31 12:05", "2026-11-16 10:00"),
    ("T1021", "C022", "iOS app crashes on startup after update",
     "Since updating to 4.3.0 the iOS app crashes right after the splash screen. "
     "My whole team is on iOS and nobody can work. Please fix this asap!",
     "open", "urgent", "2026-11-03 07:50", "2026-11-19 07:50"),
    ("T1022", "C023", "Double charge on my credit card",
     "I see two identical charges of 19.99 EUR from you on my credit card statement from "
     "2 November. I only have one account. Can you check?",
     "open", "normal", "2026-11-04 20:14", "2026-11-13 08:02"),
    ("T1023", "C024", "GST invoice needed",
     "We're registered for GST in India and need a tax invoice with our GSTIN for every "
     "payment. Can your invoices include it?",
     "open", "normal", "2026-11-05 05:41", "2026-11-15 11:30"),
    ("T1024", "C025", "Changing my login email",
     "I'd like to change the login email on my account from my old work address to "
     "elodie.martin@example.com. I can't find where to do it in the settings.",
     "pending", "low", "2026-11-06 13:09", "2026-11-09 10:20"),
    ("T1025", "C026", "Webhook stopped firing",
     "Our order.created webhook stopped firing around noon yesterday. "
     "The endpoint is up and returns 200 when we test it manually.",
     "open", "high", "2026-11-08 09:27", "2026-11-08 09:27"),
    ("T1026", "C027", "Refund not received yet",
     "You confirmed my refund on November 1st but it still hasn't reached my account. "
     "How long does it usually take?",
     "open", "normal", "2026-11-09 15:33", "2026-11-10 09:01"),
    ("T1027", "C028", "Third time asking about unauthorised charges",
     "This is the third time I'm writing about the charges you took after I cancelled in "
     "September. Nobody has answered. If I don't have my money back by Friday, my lawyer will "
     "take this further.",
     "open", "high", "2026-11-10 18:06", "2026-11-20 16:45"),
    ("T1028", "C029", "Colleague can't accept the invite",
     "I invited a colleague to our workspace but the invite link says it has expired, "
     "even though I sent it ten minutes ago.",
     "open", "normal", "2026-11-11 10:52", "2026-11-11 10:52"),
    ("T1029", "C030", "Invoice for November",
     "Where can I download the invoice for November? The billing page only shows invoices up "
     "to October.",
     "pending", "low", "2026-11-12 08:18", "2026-11-13 12:40"),
    ("T1030", "C002", "CSV export still broken",
     "Any update on the CSV export? We need it for month-end closing.",
     "open", "high", "2026-11-13 14:27", "2026-11-13 14:27"),
    ("T1031", "C009", "Discount code not applied",
     "The code WELCOME15 was accepted at checkout but the total didn't change. Order #62890.",
     "open", "normal", "2026-11-14 16:10", "2026-11-15 09:44"),
    ("T1032", "C010", "Password reset link says invalid token",
     "The password reset link in your email opens a page saying 'invalid or expired token'. "
     "I clicked it within a minute of getting it.",
     "open", "high", "2026-11-16 06:58", "2026-11-16 06:58"),
    ("T1033", "C017", "申请退款",
     "您好，我上周购买了年度会员，但是发现不适合我的需求。请问可以退款吗？订单号是 #63105。谢谢！",
     "open", "normal", "2026-11-17 02:24", "2026-11-17 02:24"),
    ("T1034", "C015", "Receipts show the old company name",
     "Our receipts say 'Bennett Design' but the company is now 'Bennett & Co Studio Ltd'. "
     "Please correct it for future receipts.",
     "open", "low", "2026-11-18 11:36", "2026-11-19 08:05"),
    ("T1035", "C006", "Sync between devices not working",
     "Changes I make on my laptop don't show up on my phone anymore, even after logging out "
     "and in again. The last sync was three days ago.",
     "open", "normal", "2026-11-19 19:49", "2026-11-20 07:12"),
    ("T1036", "C019", "Please delete my account",
     "I'd like my account and all my data deleted. Please confirm when it's done.",
     "open", "normal", "2026-11-20 13:03", "2026-11-21 10:30"),
    ("T1037", "C021", "Charged after cancelling",
     "I cancelled my plan on November 10 but was charged again on November 20. "
     "Please refund this charge.",
     "open", "high", "2026-11-21 09:15", "2026-11-22 11:48"),
    ("T1038", "C026", "2FA SMS not arriving",
     "I don't receive the SMS code for two-factor login, and my number in the profile is "
     "correct. I'm locked out of our admin account and payroll runs today. Can I switch to an "
     "authenticator app?",
     "open", "urgent", "2026-11-23 07:02", "2026-11-23 07:02"),
    ("T1039", "C024", "Bulk edit freezes the page",
     "Selecting more than 50 products and choosing 'Bulk edit' freezes the browser tab. "
     "It happens every time.",
     "open", "normal", "2026-11-24 14:21", "2026-11-25 09:10"),
    ("T1040", "C007", "Where do I find my API key?",
     "Found it under Settings > Developers, never mind. Thanks!",
     "closed", "low", "2026-11-25 16:40", "2026-11-26 08:55"),
    ("T1041", "C029", "Question about my invoice",
     "Hi, my latest invoice (INV-2026-1187) shows 24.00 EUR but my plan is 20.00 EUR a month. "
     "Is the difference VAT? It wasn't on my earlier invoices.",
     "open", "normal", "2026-11-27 14:20", "2026-11-27 14:20"),
]  # fmt: skip


def _conversation(ticket_id: str, customer: Customer, body: str, created: str) -> list[Message]:
    opening = Message(
        id=opening_message_id(ticket_id),
        author="customer",
        author_name=customer.name,
        body=body,
        created_at=_at(created),
    )
    later = [
        Message(
            id=f"{ticket_id}-m{n}",
            author=author,
            author_name=customer.name if author == "customer" else name,
            body=text,
            created_at=_at(at),
        )
        for n, (author, name, at, text) in enumerate(LATER_MESSAGES.get(ticket_id, []), start=2)
    ]
    return [opening, *later]


TICKETS: tuple[Ticket, ...] = tuple(
    Ticket(
        id=tid,
        customer=_BY_ID[cid],
        subject=subject,
        body=body,
        status=status,
        priority=priority,
        created_at=_at(created),
        updated_at=_at(updated),
        messages=_conversation(tid, _BY_ID[cid], body, created),
    )
    for tid, cid, subject, body, status, priority, created, updated in _ROWS
)
