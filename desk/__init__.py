"""The `desk` command: run a service, the embedded stack, or ask the running stack questions."""
