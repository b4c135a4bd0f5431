"""Monitoring: score drift against a baseline, and alerts sent once per partition, metric and segment."""

__all__: list[str] = []
