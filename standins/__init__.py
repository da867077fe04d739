"""Stand-ins for the systems Ambient Desk talks to, each a real HTTP server on 127.0.0.1.

The test suite (`tests/`) and the fault suite (`chaos/`) put them behind the same interface the
product uses (a URL in its settings), so the product's own client code runs unpatched:

- `standins.llm.FakeLLM`: an OpenAI-compatible chat-completions server (the drafter's model);
- `standins.channel.FakeChannel`: a helpdesk's reply endpoint or a Slack-compatible incoming
  webhook (the sender's delivery channel and supervisor notifications);
- `standins.collector.Collector`: an OpenTelemetry collector's OTLP/HTTP trace receiver (where
  every service exports its spans, with DESK_OTLP_ENDPOINT).

Each serves from a background thread with its own event loop (`standins.server`), so it answers
in-process async tests, threads and other processes alike. Nothing in the product (`shared/`,
`services/`, `desk/`) imports this package, and it is not part of the installed wheel.
"""
