"""The ports desk hands out to the processes it starts."""

from __future__ import annotations

from pathlib import Path

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


def test_a_service_whose_port_was_taken_meanwhile_starts_again_on_other_ports(
    tmp_path: Path,
) -> None:
    """A port chosen free can be bound by another process (a parallel test's) before the
    service binds it; the service exits saying so, and the test's start picks other ports
    rather than failing (a sender's start failed so once in a fresh clone's run)."""
    import socket

    from tests.services_running import ServiceProcess

    service = ServiceProcess(
        ["router"],
        {"DESK_NATS_URL": "nats://127.0.0.1:1", "DESK_VAR_DIR": str(tmp_path / "var")},
        tmp_path / "router.log",
    )
    taken = service.ops_port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", taken))
        squatter.listen()
        try:
            service.start(ready=False)  # health only: there is no broker
            assert service.ops_port != taken
            assert "address already in use" in service.log.read_text().lower()
        finally:
            service.kill()
