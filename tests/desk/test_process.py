"""The ports desk hands out to the processes it starts."""

from __future__ import annotations

from desk.process import free_port, kernel_port_range


def test_free_port_never_hands_out_the_same_port_twice() -> None:
    """A service's public and ops ports were once given the same number (the kernel offered a
    just-closed port again), and the service could never start."""
    given = [free_port() for _ in range(300)]
    assert len(set(given)) == len(given)


def test_a_port_handed_out_is_outside_the_range_outgoing_connections_take() -> None:
    """A service killed and started again on its ports (by the supervisor, or a test) once found
    one taken: the kernel had given it, freed in between, to an outgoing connection."""
    low, high = kernel_port_range()
    given = [free_port() for _ in range(100)]
    assert not [port for port in given if low <= port <= high]
    assert all(1024 <= port < 65536 for port in given)
