"""Reporting: run summaries and Prefect artifacts, and the self-contained HTML report."""

__all__: list[str] = []
