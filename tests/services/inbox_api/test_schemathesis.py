"""Property-based: requests generated from /openapi.json never get a server error."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from desk.natsserver import NatsServer
from tests.services_running import ServiceProcess

from .conftest import REVIEWER, write_credentials


@pytest.fixture(scope="module")
def running_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("schemathesis")
    nats = NatsServer(root / "nats", sync_always=False)
    nats.start()
    write_credentials(root / "var")
    env = {"DESK_NATS_URL": nats.url, "DESK_VAR_DIR": str(root / "var")}
    process = ServiceProcess(["inbox_api"], env, root / "inbox_api.log").start()
    try:
        yield process.url
    finally:
        process.stop()
        nats.kill()


@pytest.fixture(scope="module")
def api_schema(running_api: str) -> schemathesis.BaseSchema:
    schema = schemathesis.openapi.from_url(f"{running_api}/openapi.json")
    schema.config.update(base_url=running_api)
    return schema


def test_no_generated_request_gets_a_server_error(api_schema: schemathesis.BaseSchema) -> None:
    operations = [result.ok() for result in api_schema.get_all_operations()]  # type: ignore[union-attr]
    assert len(operations) >= 7
    for operation in operations:

        @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy())
        def no_server_error(case: schemathesis.Case) -> None:
            response = case.call(headers={"Authorization": f"Bearer {REVIEWER}"})
            assert response.status_code < 500, (
                f"{case.method} {case.formatted_path}: {response.status_code} {response.text[:300]}"
            )

        no_server_error()
