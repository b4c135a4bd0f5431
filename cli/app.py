"""The ``ragpulse`` program: its options before any command (``--verbose``, ``--version``) and its commands, in the
order ``--help`` lists them. The commands live by what they do: those that run a flow in ``runs``, those over the
published tables in ``published``, the lists of metrics and settings in ``listings``; how the process is tuned
around them in ``startup``.

Prefect is imported lazily so that ``--help`` stays quick; the run configuration is not, since the options are
made from it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer

from ragpulse.cli import listings, published, runs
from ragpulse.cli.output import ExitCode, FlagsCommand, FlagsGroup
from ragpulse.cli.startup import Program, prefect_environment

__all__ = ["app", "main"]

app = Program(
    help="ragpulse: monitor the quality of RAG systems from their traces.",
    epilog="Exit codes: 0 ok, 1 the work failed, 2 usage or configuration error, 3 nothing to do (no traces for "
    "the date, nothing left to evaluate in a backfill's range).",
    no_args_is_help=True,
    cls=FlagsGroup,
)


def _print_version(value: bool) -> None:
    """``--version``: answered before any command runs, so it never loads Prefect."""
    if value:
        from ragpulse import __version__

        typer.echo(f"ragpulse {__version__}")
        raise typer.Exit(ExitCode.OK)


@app.callback()
def main(
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show Prefect's task-level logs (before or after the command).")
    ] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    prefect_environment(verbose)


_COMMANDS: dict[str, Callable[..., Any]] = {
    "evaluate": runs.evaluate,
    "monitor": runs.monitor,
    "backfill": runs.backfill,
    "serve": runs.serve,
    "report": published.report,
    "demo": runs.demo,
    "dashboard": published.dashboard,
    "calibrate": runs.calibrate,
    "label-sample": published.label_sample,
    "migrate-lake": published.migrate_lake,
    "metrics": listings.list_metrics,
    "settings": listings.list_settings,
}
for _name, _command in _COMMANDS.items():
    app.command(_name, cls=FlagsCommand)(_command)
