"""The commands' shared options, most of them made from the run configuration, so each setting is declared once
(in RunConfig) and has one name on every command.

``@setting_options("source", "scoring", ...)`` adds one option per setting of those groups (and of the single
settings named in ``extra``) to a typer command, named after the setting's flat name (``--batch-size``), with the
field's description as help and its group as help panel; the command receives the options given, by flat name, as
``settings`` and loads the configuration with ``load_config(config, **settings)`` (or ``load_group``). An option
left out is None, so the environment, the TOML file and the defaults still apply underneath it.
"""

import datetime as dt
import functools
import inspect
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel
from rich.markup import escape

from ragpulse.cli.output import ExitCode, fail, fail_with
from ragpulse.tasks.config import SETTINGS, Setting, from_text
from ragpulse.tasks.core.exceptions import ConfigError

__all__ = ["ConfigOption", "DryRunOption", "JsonOption", "parse_date", "setting_options"]

_F = TypeVar("_F", bound=Callable[..., Any])

ConfigOption = Annotated[Path | None, typer.Option(help="TOML config file (default ./ragpulse.toml if present).")]
DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="Check the configuration, list the partitions, price the judge; run nothing.")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")]

#: Short names the command line has always accepted beside the flat ones.
_ALIASES: dict[str, tuple[str, ...]] = {"sample_rate": ("--sample",), "trace_format": ("--format",)}


def parse_date(value: str, option: str) -> dt.date:
    """A date option's value, or a one-line usage error naming the option."""
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise fail(f"{option} must be a date like 2026-11-28, got {value!r}", ExitCode.USAGE) from None


def _option_type(setting: Setting) -> type:
    """What typer parses: numbers and flags as such; everything else as text that pydantic validates."""
    annotation = setting.info.annotation
    arguments = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    for kind in (bool, int, float):
        if arguments == [kind]:
            return kind
    return str


def _help(setting: Setting) -> str:
    field = setting.info
    kind = typing.get_origin(field.annotation)
    # A tuple of names is comma-separated; a tuple of models (threshold rules) has its own form, in its description.
    listed = kind is tuple and not any(
        isinstance(a, type) and issubclass(a, BaseModel) for a in typing.get_args(field.annotation)
    )
    suffix = " (JSON object)" if kind is dict else " (comma-separated)" if listed else ""
    if kind is typing.Literal:
        suffix = f" (one of: {', '.join(typing.get_args(field.annotation))})"
    # Rich reads [...] as markup: a syntax such as a threshold rule's "[per <segment>]" is shown as written.
    return escape(f"{field.description or setting.field}{suffix} (env {setting.env})")


def _parameter(setting: Setting) -> inspect.Parameter:
    kind = _option_type(setting)
    # A flag needs its negative too: a setting that defaults to true must be settable to false.
    names = (f"{setting.option}/--no-{setting.option[2:]}",) if kind is bool else (setting.option,)
    option = typer.Option(
        *names, *_ALIASES.get(setting.flat, ()), help=_help(setting), rich_help_panel=setting.group.title(),
        show_default=False,
    )  # fmt: skip
    return inspect.Parameter(
        setting.flat, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[kind | None, option]
    )


def _former_parameter(name: str, option: str, setting: Setting) -> inspect.Parameter:
    """A setting's option under a name a command used before the flat one: still accepted, not shown in help."""
    kind, hidden = _option_type(setting), typer.Option(option, hidden=True)
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[kind | None, hidden]
    )


def setting_options(
    *groups: str, extra: tuple[str, ...] = (), former: Mapping[str, str] | None = None
) -> Callable[[_F], _F]:
    """Give a command one option per setting of ``groups`` and of the flat names in ``extra``; it receives the
    given ones as ``settings``. ``former`` maps option names the command had before (``--window-days``) to the
    flat name they stand for, so scripts that use them keep working."""
    chosen = [setting for setting in SETTINGS.values() if setting.group in groups]
    chosen += [SETTINGS[flat] for flat in extra if SETTINGS[flat].group not in groups]  # their panels after
    formers = {f"former_{option[2:].replace('-', '_')}": (option, flat) for option, flat in (former or {}).items()}

    def decorate(command: _F) -> _F:
        signature = inspect.signature(command)
        hints = typing.get_type_hints(command, include_extras=True)  # postponed annotations, resolved
        own = [p.replace(annotation=hints[name]) for name, p in signature.parameters.items() if name != "settings"]

        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for name, (option, flat) in formers.items():
                if (value := kwargs.pop(name)) is not None:
                    if kwargs.get(flat) is not None:
                        raise fail(f"give {SETTINGS[flat].option} or {option}, not both", ExitCode.USAGE)
                    kwargs[flat] = value
            given = {s.flat: kwargs.pop(s.flat) for s in chosen if kwargs.get(s.flat) is not None}
            try:
                settings = {
                    flat: from_text(SETTINGS[flat], value, SETTINGS[flat].option) if isinstance(value, str) else value
                    for flat, value in given.items()
                }
            except ConfigError as exc:
                raise fail_with(exc) from None
            for setting in chosen:
                kwargs.pop(setting.flat, None)
            return command(*args, settings=settings, **kwargs)

        hidden = [_former_parameter(name, option, SETTINGS[flat]) for name, (option, flat) in formers.items()]
        wrapper.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[*own, *(_parameter(setting) for setting in chosen), *hidden]
        )
        return typing.cast(_F, wrapper)

    return decorate
