"""A consumer declared as data (`Consumer`) and what its handler receives (`Delivery`)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic

from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from pydantic import BaseModel, ValidationError
from typing_extensions import TypeVar

from .. import envelope
from ..catalog import ConsumerSpec
from ..errors import PermanentError, first_error
from ..retry import RetryPolicy

T = TypeVar("T")  # the body as decoded: an `Envelope`, raw `bytes`, a JSON document
P = TypeVar("P", default=None)  # the envelope's data as the consumer's declared model
Decoder = Callable[[bytes, Mapping[str, str]], Any]


@dataclass(frozen=True)
class Delivery(Generic[T, P]):
    """What a handler receives: the decoded body, its data as the declared payload model, and
    the facts about this delivery. A handler of a consumer with a payload model says which:
    `Delivery[Envelope, Decision]` (its `payload` is then a `Decision`)."""

    subject: str
    body: T
    headers: Mapping[str, str]
    msg_id: str | None
    attempt: int
    stream_seq: int
    data: bytes
    stored_at: dt.datetime
    payload: P  # the body's data as the consumer's declared model (`Consumer.payload`)


Handler = Callable[[Delivery[Any, Any]], Awaitable[None]]


@dataclass(frozen=True)
class Consumer:
    """A durable pull consumer and how its messages are handled."""

    name: str
    stream: str
    subjects: tuple[str, ...]
    handler: Handler
    decode: Decoder = envelope.decode
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_deliver: int = 5
    ack_wait: float = 30.0
    concurrency: int = 8
    batch: int = 16
    max_ack_pending: int = 1000
    # what the envelope's data must be: one model, or one per subject (a consumer of several
    # kinds); validated once here, so a handler receives `delivery.payload` typed, and data
    # that is not that model is dead-lettered before any handler runs
    payload: type[BaseModel] | Mapping[str, type[BaseModel]] | None = None

    @classmethod
    def of(cls, declared: ConsumerSpec, handler: Handler, **options: Any) -> Consumer:
        """The consumer a service declares in `shared.catalog`, handled by `handler`."""
        options.setdefault("payload", declared.payload)
        return cls(
            name=declared.durable,
            stream=declared.stream,
            subjects=declared.subjects,
            handler=handler,
            **options,
        )

    def __post_init__(self) -> None:
        if not self.subjects:
            raise ValueError("a consumer needs at least one subject filter")
        if self.max_deliver < 1 or self.concurrency < 1 or self.batch < 1:
            raise ValueError("max_deliver, concurrency and batch must be at least 1")

    def read_payload(self, subject: str, body: Any) -> Any:
        """`body`'s data as the declared model; `PermanentError` if it is not one."""
        if self.payload is None:
            return None
        model = self.payload.get(subject) if isinstance(self.payload, Mapping) else self.payload
        if model is None:
            raise PermanentError(f"nothing is expected on {subject}")
        data = body.data if isinstance(body, envelope.Envelope) else body
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            raise PermanentError(f"not a {model.__name__}: {first_error(exc, 'data')}") from None

    def config(self) -> ConsumerConfig:
        filters: dict[str, Any] = (
            {"filter_subject": self.subjects[0]}
            if len(self.subjects) == 1
            else {"filter_subjects": list(self.subjects)}
        )
        return ConsumerConfig(
            name=self.name,
            durable_name=self.name,
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL,
            ack_wait=self.ack_wait,
            max_deliver=self.max_deliver + 1,  # one grace delivery, see `shared.consumer`
            max_ack_pending=self.max_ack_pending,
            sample_freq="100%",  # every ack recorded by the broker (subjects.DELIVERIES)
            **filters,
        )
