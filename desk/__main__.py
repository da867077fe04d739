"""`python -m desk` and the `desk` console script: what every service process, the stack's
supervisor and each command run.

The garbage collector is off while the modules load: start-up builds tens of thousands of
objects that live as long as the process, and collecting among them is wasted work (about a
fifth of the drafter's start-up CPU). `desk.cli.main` freezes what is loaded by then out of
later collections and turns the collector back on before any command runs."""

import gc


def run() -> int:
    gc.disable()
    from desk.cli import main

    return main()


if __name__ == "__main__":
    raise SystemExit(run())
