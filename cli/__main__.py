"""``python -m ragpulse.cli``: the same command line as ``ragpulse``."""

from ragpulse.cli.app import app

app()
