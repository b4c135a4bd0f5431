"""Prefect flows: they compose tasks and hold no metric logic."""
