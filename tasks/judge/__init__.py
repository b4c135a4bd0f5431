"""The LLM judge as a service: an OpenAI-compatible HTTP client with its settings, a persistent call cache,
a usage ledger and process-wide rate limits."""

__all__: list[str] = []
