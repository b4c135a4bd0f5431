"""Adapters from tracing tools' exports to the canonical trace format, one module per source.

``ragpulse`` is the canonical JSONL/Parquet itself (no adapter). Every other format names an
:class:`Adapter` that projects each decoded source record (a JSONL line or a Parquet row) to zero or
more :class:`~ragpulse.tasks.ingest.adapters.span.Span`; staging groups the spans of a partition by trace id and
:func:`~ragpulse.tasks.ingest.adapters.assembly.assemble` turns each group into a raw canonical trace, validated and
quarantined exactly like a JSONL line. The field mapping of each source is in docs/traces.md.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.ingest.adapters.assembly import assemble
from ragpulse.tasks.ingest.adapters.span import AdapterOptions, Span

if TYPE_CHECKING:
    from ragpulse.metrics.errors import InvalidRecordError
    from ragpulse.tasks.core.storage import SourceFile

__all__ = [
    "CANONICAL_FORMAT",
    "FORMATS",
    "Adapter",
    "AdapterOptions",
    "Span",
    "adapter_for",
    "assemble",
    "parse_options",
]

CANONICAL_FORMAT: Final = "ragpulse"
_LIST_OPTIONS = frozenset({"question_keys", "answer_keys", "retriever_names"})
_COMMON_OPTIONS = _LIST_OPTIONS | {"tool_documents_path"}
_DOCUMENT_KEYS = frozenset({"id_key", "text_key", "score_key"})
_DOCUMENT_OPTIONS = _DOCUMENT_KEYS | {"documents_path"}


@dataclass(frozen=True)
class Adapter:
    """One source format: its module (how its records become spans, which files belong to a run), which options it
    reads. The module loads on first use, so that checking a configuration's format and options (every command's
    start) does not load the readers of every format."""

    name: str
    module: str
    option_names: frozenset[str] = _COMMON_OPTIONS
    selects_files: bool = False

    @property
    def spans(self) -> Callable[[Any, AdapterOptions], Iterator[Span | InvalidRecordError]]:
        spans: Callable[[Any, AdapterOptions], Iterator[Span | InvalidRecordError]] = self._module().spans
        return spans

    @property
    def select_files(self) -> Callable[[list[SourceFile], Mapping[str, Any] | None], list[SourceFile]] | None:
        """The format's own choice of a run's files (Langfuse's exports), or None: every trace file."""
        if not self.selects_files:
            return None
        select: Callable[[list[SourceFile], Mapping[str, Any] | None], list[SourceFile]] = self._module().select_files
        return select

    @property
    def question_places(self) -> str:
        """Where the format keeps the user's message, for the reason that quarantines a trace without one: the
        module's ``QUESTION_PLACES``."""
        places: str = self._module().QUESTION_PLACES
        return places

    def _module(self) -> Any:
        return importlib.import_module(f"{__name__}.{self.module}")


def _registry() -> dict[str, Adapter]:
    return {
        "openinference": Adapter("openinference", "openinference"),
        "otel-genai": Adapter("otel-genai", "otel_genai", _COMMON_OPTIONS | _DOCUMENT_KEYS),
        "langfuse": Adapter("langfuse", "langfuse", _COMMON_OPTIONS | _DOCUMENT_OPTIONS, selects_files=True),
        "langsmith": Adapter("langsmith", "langsmith", _COMMON_OPTIONS | _DOCUMENT_OPTIONS),
    }


_ADAPTERS = _registry()
FORMATS = (CANONICAL_FORMAT, *_ADAPTERS)
"""Every accepted ``trace_format``, the canonical one first."""


def adapter_for(trace_format: str) -> Adapter | None:
    """The adapter of ``trace_format``; None for the canonical format. ConfigError lists the formats."""
    if trace_format == CANONICAL_FORMAT:
        return None
    try:
        return _ADAPTERS[trace_format]
    except KeyError:
        raise ConfigError(f"unknown trace_format {trace_format!r}; use one of {', '.join(FORMATS)}") from None


def parse_options(trace_format: str, options: Mapping[str, Any] | None) -> AdapterOptions:
    """``format_options`` checked against what the format reads; ConfigError names unknown keys and bad values."""
    adapter = adapter_for(trace_format)
    given = dict(options or {})
    if adapter is None:
        if given:
            raise ConfigError(f"format_options {sorted(given)} are not read by trace_format {trace_format!r}")
        return AdapterOptions()
    unknown = sorted(set(given) - adapter.option_names)
    if unknown:
        raise ConfigError(
            f"format_options {unknown} are not read by trace_format {trace_format!r}; "
            f"it reads {', '.join(sorted(adapter.option_names))}"
        )
    values: dict[str, Any] = {}
    for key, value in given.items():
        if key in _LIST_OPTIONS:
            items = [value] if isinstance(value, str) else value
            if not isinstance(items, list | tuple) or not all(isinstance(i, str) and i for i in items):
                raise ConfigError(f"format_options.{key} must be a list of non-empty strings, got {value!r}")
            values[key] = tuple(items)
        elif not isinstance(value, str):
            raise ConfigError(f"format_options.{key} must be a dotted path string, got {value!r}")
        else:
            values[key] = value
    return AdapterOptions(**values)
