"""The inbox_api service: projects items into SQL and serves the review inbox (API, page, CLI).

Like every service it runs as `main.run(settings)` (`desk inbox_api`). Everything else reaches
it through its HTTP API (`desk inbox`, the fault suite's reviewer); it offers nothing to code
outside services/ (`__all__` is empty; tests/test_layout.py holds desk/, chaos/ and benchmarks/
to it).
"""

__all__: list[str] = []
