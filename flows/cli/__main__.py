"""``python -m ragpulse.flows.cli``: the same command line as ``ragpulse``."""

from ragpulse.flows.cli.app import app

app()
