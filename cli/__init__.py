"""The ``ragpulse`` command line: typer commands over the flows. Prefect is imported lazily so ``--help`` is instant."""

from ragpulse.cli.app import app

__all__ = ["app"]
