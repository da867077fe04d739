"""The insider group: every NATS user tries what its declaration in `shared.catalog` does not
give it, on a real nats-server secured with `shared.permissions.authorization_block`.

    python -m chaos.badinput --only insiders

The probe list is derived from the catalog, never written out: for each service or role user
(`shared.permissions.USERS`),

- every other role's durable consumer: create (with and without its filters, and the legacy
  durable-create), info, next message, delete, pause, leader step-down, unpin, an ack, and a
  forged max-deliveries advisory; on its own consumers everything but create, info, next and
  ack; on every stream, consumers outside the catalog (ephemeral, a new name, names, list);
- every data subject (each stream, every subject some role publishes or consumes, each
  `dlq.<role>`, made concrete) its declared publishes do not cover; replies into the default
  inbox and into every user's inbox prefix;
- every key-value bucket it does not write (`$KV.<bucket>.<key>`); single-message reads
  (STREAM.MSG.GET, DIRECT.GET, and STREAM.INFO of a bucket) of the streams and buckets it does not
  read; STREAM.CREATE/UPDATE/DELETE/PURGE/SNAPSHOT/RESTORE/step-down/peer-remove of every stream
  and bucket, STREAM.MSG.DELETE where it declares no deletes, and the account-wide API;
- core subscriptions to `>`, the default inbox, other users' inbox prefixes, every stream's
  subjects (also as a queue group), every data subject, the JetStream API, acks, advisories,
  the buckets and `$SYS`.

Each probe is a core `publish` (or `subscribe`) and then a flush: the server answers a refused
one with `-ERR 'Permissions Violation for Publish to "<subject>"'` (or "for Subscription to")
before the PONG, and nats-py hands it to `error_cb` (lowercased) while it parses, before the
flush returns. nats-py 2.16's `flush()` however writes its PING straight to the socket, past a
PUB still waiting in the client's pending buffer (about 1 probe in 10 saw its PONG first), so
`settle` flushes twice: by the time the first PONG arrives the flusher task has written the
PUB, and the second PING follows it on the wire. A probe counts as accepted when no violation
naming its own subject was recorded; any other error is a stray and fails the group.

Every operation the declaration does give (its publishes, its consumers, its buckets, its reads
and deletes, its own inbox, and the readiness calls every service makes) is tried the same way
as a positive control and must not be refused, so the group cannot pass by refusing everything.

Subject permissions cannot see inside a request: a user that could create its own durable could
give it any filter in the stream, or a `deliver_subject` that turns it into a push consumer the
server delivers on. So only the admin creates consumers (`desk provision`), and these `config`
probes send such requests on each user's own create subject; an answer without an error counts
as accepted and fails the group.
"""

from .group import run_insiders
from .inventory import buckets, data_subjects, may_publish, readable, streams
from .operations import controls, probes
from .probe import KNOWN_GAPS, PUBLISH, REQUEST, SUBSCRIBE

__all__ = [
    "KNOWN_GAPS",
    "PUBLISH",
    "REQUEST",
    "SUBSCRIBE",
    "buckets",
    "controls",
    "data_subjects",
    "may_publish",
    "probes",
    "readable",
    "run_insiders",
    "streams",
]
