"""NATS header names the system reads or writes, spelled once."""

from __future__ import annotations

MSG_ID = "Nats-Msg-Id"
CORRELATION_ID = "Desk-Correlation-Id"

# Result events are CloudEvents in structured mode (the CloudEvents NATS protocol binding).
CONTENT_TYPE = "content-type"
CLOUDEVENTS_JSON = "application/cloudevents+json"

# Written by ingress (and the reconciler) on every stored event.
SOURCE = "Desk-Source"
EVENT_ID = "Desk-Event-Id"
EVENT_TYPE = "Desk-Event-Type"
RECEIVED_AT = "Desk-Received-At"
OWN_PREFIX = "Desk-"  # never accepted from outside

# Written on every dead letter, next to the original message's own headers.
DLQ_SERVICE = "Desk-Dlq-Service"
DLQ_CONSUMER = "Desk-Dlq-Consumer"
DLQ_STREAM = "Desk-Dlq-Stream"
DLQ_STREAM_SEQ = "Desk-Dlq-Stream-Seq"
DLQ_SUBJECT = "Desk-Dlq-Subject"
DLQ_ATTEMPTS = "Desk-Dlq-Attempts"
DLQ_REASON = "Desk-Dlq-Reason"
DLQ_ERROR = "Desk-Dlq-Error"
DLQ_TIME = "Desk-Dlq-Time"
ORIGINAL_MSG_ID = "Desk-Original-Msg-Id"

BROKER_PREFIX = "Nats-"  # headers the broker interprets; never copied from one message to another
