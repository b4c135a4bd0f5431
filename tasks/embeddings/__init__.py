"""Local embedding and cross-encoder models for the semantic metrics, shipped inside PyPI wheels and loaded once per
worker process; nothing is ever downloaded."""

__all__: list[str] = []
