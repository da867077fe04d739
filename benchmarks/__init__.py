"""Benchmarks: scripts run by `make bench`, never timed assertions in the test suite."""
