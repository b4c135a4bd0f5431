"""The LLM judge, whole in one room: its settings (the judge group of the run configuration, ``config``) and
secrets (``secrets``), the checks before a run (``preflight``), the judge plan (which metrics it judges, on which
sample: ``plan``), the judge-metric task (``tasks``), and the OpenAI-compatible HTTP client (``client``) with its
persistent call cache, usage ledger and process-wide rate limits.

Nothing is imported here: the run configuration reads ``config`` while ``ragpulse --help`` starts, and must not
load the client and its dependencies on the way."""

__all__: list[str] = []
