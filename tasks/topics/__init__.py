"""Topics of the questions: fit on the baseline window, each day's questions assigned, named by their terms, and
their shares compared (docs/topics.md)."""

__all__: list[str] = []
