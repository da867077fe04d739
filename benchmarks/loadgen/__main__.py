"""The generator's child process, started by `LoadGenerator` as `python -m benchmarks.loadgen`."""

from .generator import serve

serve()
