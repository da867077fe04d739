"""The ports desk hands out to the processes it starts."""

from __future__ import annotations

from desk.process import free_port


def test_free_port_never_hands_out_the_same_port_twice() -> None:
    """A service's public and ops ports were once given the same number (the kernel offered a
    just-closed port again), and the service could never start."""
    given = [free_port() for _ in range(300)]
    assert len(set(given)) == len(given)
