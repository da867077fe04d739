"""The fault suite: a bounded, seeded workload against the real stack while faults are injected.

Run with `python -m chaos [--events N] [--seed S] [--deadline SECONDS]` (or `make chaos`).
"""
