"""The router service: rule-based (never model-based) fan-out from EVENTS to WORK.

Like every service it runs as `main.run(settings)` (`desk router`). It offers nothing else to
code outside services/ (`__all__` is empty; tests/test_layout.py holds desk/, chaos/ and
benchmarks/ to it).
"""

__all__: list[str] = []
