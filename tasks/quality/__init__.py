"""Data-quality gates: Great Expectations suites on the staged traces and on the score table."""

__all__: list[str] = []
