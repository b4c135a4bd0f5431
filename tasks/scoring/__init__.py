"""Scoring staged batches: retrieval and answer metrics, judge and semantic metrics, embeddings, and
assembling a partition's scores."""

__all__: list[str] = []
