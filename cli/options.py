"""Command-line options made from the run configuration, so each setting is declared once (in RunConfig).

``@setting_options("source", "scoring", ...)`` adds one option per setting of those groups to a typer command,
named after the setting's flat name (``--batch-size``), with the field's description as help and its group as help
panel; the command receives the options given, by flat name, as ``settings`` and loads the configuration with
``load_config(config, **settings)``. An option left out is None, so the environment, the TOML file and the defaults
still apply underneath it.
"""

import functools
import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from ragpulse.cli.output import fail_with
from ragpulse.tasks.config import SETTINGS, Setting, from_text
from ragpulse.tasks.core.exceptions import ConfigError

__all__ = ["ConfigOption", "setting_options"]

_F = TypeVar("_F", bound=Callable[..., Any])

ConfigOption = Annotated[Path | None, typer.Option(help="TOML config file (default ./ragpulse.toml if present).")]

#: Short names the command line has always accepted beside the flat ones.
_ALIASES: dict[str, tuple[str, ...]] = {"sample_rate": ("--sample",), "trace_format": ("--format",)}


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
    suffix = " (JSON object)" if kind is dict else " (comma-separated)" if kind is tuple else ""
    if kind is typing.Literal:
        suffix = f" (one of: {', '.join(typing.get_args(field.annotation))})"
    return f"{field.description or setting.field}{suffix} (env {setting.env})"


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


def setting_options(*groups: str) -> Callable[[_F], _F]:
    """Give a command one option per setting of ``groups``; it receives the given ones as ``settings``."""
    chosen = [setting for setting in SETTINGS.values() if setting.group in groups]

    def decorate(command: _F) -> _F:
        signature = inspect.signature(command)
        hints = typing.get_type_hints(command, include_extras=True)  # postponed annotations, resolved
        own = [p.replace(annotation=hints[name]) for name, p in signature.parameters.items() if name != "settings"]

        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
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

        wrapper.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[*own, *(_parameter(setting) for setting in chosen)]
        )
        return typing.cast(_F, wrapper)

    return decorate
