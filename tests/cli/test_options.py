"""Options made from the run configuration: one per setting, flags with their negative, JSON and list values."""

from __future__ import annotations

from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from ragpulse.cli import app
from ragpulse.cli.options import setting_options
from ragpulse.tasks.config import GROUPS, PARTITION_GROUPS, SETTINGS

runner = CliRunner()
probe = typer.Typer()
received: list[dict[str, Any]] = []


@probe.command()
@setting_options(*GROUPS)
def show(*, settings: dict[str, Any]) -> None:
    received.append(settings)


@probe.command()
@setting_options("calibration", extra=("warehouse",), former={"--window-days": "label_window_days"})
def renamed(*, settings: dict[str, Any]) -> None:
    received.append(settings)


@probe.command()
def other() -> None:
    """A second command, so typer keeps ``show`` a subcommand."""


def given(*args: str, command: str = "show") -> dict[str, Any]:
    received.clear()
    result = runner.invoke(probe, [command, *args])
    assert result.exit_code == 0, result.output
    return received[-1]


@pytest.mark.parametrize(
    ("command", "groups"),
    [("evaluate", PARTITION_GROUPS), ("monitor", GROUPS), ("backfill", GROUPS), ("serve", GROUPS)],
)
def test_every_setting_of_a_commands_groups_is_an_option(command: str, groups: tuple[str, ...]) -> None:
    names = {param.name for param in typer.main.get_command(app).commands[command].params}  # type: ignore[attr-defined]
    expected = {flat for flat, setting in SETTINGS.items() if setting.group in groups}
    assert expected <= names, sorted(expected - names)
    assert not {flat for flat, setting in SETTINGS.items() if setting.group not in groups} & names


def test_options_left_out_are_not_given_so_lower_sources_apply() -> None:
    assert given() == {}


def test_flags_can_be_turned_off_and_on() -> None:
    assert given("--no-alert-emit-events") == {"alert_emit_events": False}
    assert given("--alert-emit-events") == {"alert_emit_events": True}


def test_mappings_are_json_and_lists_comma_separated() -> None:
    values = given(
        "--storage-options", '{"endpoint_url": "http://127.0.0.1:9000"}', "--metrics", "document_mrr,recall@5"
    )
    assert values == {"storage_options": {"endpoint_url": "http://127.0.0.1:9000"}, "metrics": "document_mrr,recall@5"}


def test_a_mapping_that_is_not_json_is_a_one_line_error() -> None:
    result = runner.invoke(probe, ["show", "--format-options", "{id_key: x}"])
    assert result.exit_code == 2
    assert "--format-options must be a JSON object" in result.output and "Traceback" not in result.output


def test_historical_short_names_still_work() -> None:
    # sample_rate is a share or "auto": typer hands the text on, and the settings read it as one or the other.
    assert given("--sample", "0.5", "--format", "langfuse") == {"sample_rate": "0.5", "trace_format": "langfuse"}
    assert given("--sample", "auto") == {"sample_rate": "auto"}


def test_calibrate_says_its_settings_as_every_other_command_does() -> None:
    calibrate = typer.main.get_command(app).commands["calibrate"]  # type: ignore[attr-defined]
    shown = {option for param in calibrate.params if not param.hidden for option in param.opts}
    for flat in ("labels", "label_window_days", "calibration_confidence", "calibration_min_labels", "warehouse"):
        assert SETTINGS[flat].option in shown
    assert not {"--window-days", "--confidence", "--min-labels"} & shown
    help_text = runner.invoke(app, ["calibrate", "--help"]).output
    assert "--label-window-days" in help_text and "--window-days" not in help_text.replace("--label-window-days", "")


def test_a_former_option_name_still_gives_its_setting() -> None:
    assert given("--window-days", "7", command="renamed") == {"label_window_days": 7}
    assert given("--label-window-days", "7", "--warehouse", "duckdb:///x.duckdb", command="renamed") == {
        "label_window_days": 7,
        "warehouse": "duckdb:///x.duckdb",
    }
    both = runner.invoke(probe, ["renamed", "--window-days", "7", "--label-window-days", "3"])
    assert both.exit_code == 2
    assert "give --label-window-days or --window-days, not both" in both.output


@pytest.mark.parametrize(
    ("former", "setting"),
    [("--window-days", "label_window_days"), ("--confidence", "calibration_confidence"),
     ("--min-labels", "calibration_min_labels")],
)  # fmt: skip
def test_calibrate_still_takes_its_former_option_names(former: str, setting: str) -> None:
    """An invalid value under the former name is refused under the setting's name: the option reached it."""
    result = runner.invoke(app, ["calibrate", "--date", "2026-11-28", "--labels", "/nowhere", former, "0"])
    assert result.exit_code == 2, result.output
    assert f"{setting}:" in result.output


def test_help_says_how_a_list_is_written() -> None:
    """Names are comma-separated; threshold rules, models with a form of their own, say theirs (';'), with the
    rule's brackets shown as written rather than read as markup."""
    from ragpulse.cli.options import _help

    assert "(comma-separated)" in _help(SETTINGS["metrics"])
    rules = _help(SETTINGS["threshold_rules"])
    assert "comma-separated" not in rules and "';'-separated" in rules and "\\[per <segment>]" in rules
