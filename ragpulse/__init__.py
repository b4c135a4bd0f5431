"""ragpulse: monitor the quality of RAG systems in production with Prefect flows that score logged traces.

One import root over the repository's rooms (imports point one way, cli -> flows -> tasks -> metrics):

- ``ragpulse.cli``: the ``ragpulse`` command line;
- ``ragpulse.flows``: Prefect flows (evaluate, monitor, backfill, calibrate);
- ``ragpulse.tasks``: Prefect tasks and the I/O libraries they call, one concern per sub-package;
- ``ragpulse.metrics``: pure metric code, no Prefect and no I/O.

Importing ``ragpulse`` itself loads nothing else, so ``ragpulse.__version__`` is cheap.
"""

from importlib.metadata import PackageNotFoundError, version

__all__ = ["__version__"]

try:
    __version__ = version("ragpulse")
except PackageNotFoundError:  # pragma: no cover - running from a source tree that was never installed
    __version__ = "0+unknown"
