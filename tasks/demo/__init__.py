"""The demo: realistic traces generated from a shipped sample of public RAG evaluation data."""

__all__: list[str] = []
