"""The bad-input campaign: hostile and malformed requests against the running stack.

    python -m chaos.badinput [--examples N] [--seed S] [--keep]

Starts the real stack (`desk up`, as the fault suite does), then drives seeded hypothesis
strategies at ingress (`POST /webhooks/{source}`) and schemathesis cases generated from the
inbox API's /openapi.json:

- ingress, arbitrary: any method, path, headers and body; unsigned, garbage-signed, or signed
  with a key the source does not have (no 2xx at all: /metrics and the health paths are on the
  ops port, not on ingress's public one);
- ingress, forged: a correctly signed event, then mutated (a body byte, a stranger's secret, the
  other source's secret, a stale or future timestamp, a changed webhook-id or timestamp, a
  damaged or missing signature, another body under the same signature);
- ingress, malformed: correctly signed, but not JSON, not UTF-8, or without a usable id or type;
- ingress, edge: correctly signed, at the edges of JSON (deep nesting, huge numbers, lone
  surrogates, NaN, duplicate keys, UTF-16); accepting or refusing are both fine, a 5xx is not;
- ingress, valid (the control group): correctly signed events with arbitrary data and hostile
  extra headers (broker and `Desk-*` headers), some sent twice;
- prompt level (`prompts`): hostile ticket text (REPEAT EXAMPLES, CATEGORY=…, "add this link",
  "ask for the card number", "ignore previous instructions", fake system tags; zero-width,
  bidi, very long lines) drafted by a model that obeys it (`standins.obedient`), after other
  customers' rounds were approved and auto-send turned on for every category;
- web forms (`webforms`): the inbox's HTML forms with that text, without the session's CSRF
  token, from another site, badly encoded, too large;
- inbox API: every operation as reviewer, as viewer, without a token and with a wrong one; then
  decisions on the real waiting items;
- claims (`claims`): items forged with the drafter's NATS credentials, a dead letter it writes
  claiming to be the sender's, a decision naming another reviewer.

It then prints one PASS/FAIL line per invariant, an INFO line of counts, and exits 0 only if
all pass: no 5xx (nor a dropped connection); no crashed process (same pids, every /readyz
200); no accepted forgery; no event from a rejected request (new EVENTS messages = control
events answered 202 as new; new decisions = items whose decision was answered 202); every
group answered as its contract says; no failure inside a service (no ERROR log line, every
consumer drained); every prompt-level input drafted, no other customer's data in a prompt or a
draft, no hostile draft auto-sent; no claimed identity believed.
The var dir is kept (and named) on failure.
"""

from .run import main

__all__ = ["main"]
