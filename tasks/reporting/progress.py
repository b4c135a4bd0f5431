"""Progress of the evaluation of a day in this process, told to listeners at the boundaries of its stages.

The evaluate flow calls these from its own thread as it sees its tasks' futures complete, so a listener (the CLI's
progress display) hears the same on any task runner, Dask's workers included. Without a listener nothing is counted
or waited for: a deployment's run registers none.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from prefect.futures import PrefectFuture, as_completed

from ragpulse.tasks.warehouse.protocol import Publication

__all__ = ["BatchProgress", "EvaluateProgress", "notify", "notify_published", "progress_listener", "slice_progress"]


class EvaluateProgress(Protocol):
    """Told how the evaluation of a day in this process goes, at the boundaries of its stages; the CLI's progress
    display is one. Every call comes from the flow's own thread, as the flow sees its tasks' futures complete, so it
    works on any task runner (Dask's workers included)."""

    def staging(self, day: dt.date, slices: int, of: int, traces: int) -> None:
        """``slices`` of the day's ``of`` staging slices are staged (0 when staging starts), ``traces`` valid traces
        in them so far."""

    def scoring(self, day: dt.date, batches: int, of: int, cached: int) -> None:
        """``batches`` of the day's ``of`` batches are scored (every scoring task of the batch done; 0 when scoring
        starts), ``cached`` of them from the cache."""

    def publishing(self, day: dt.date) -> None:
        """Every batch is scored: the day's scores are assembled and validated, then published."""

    def published(self, day: dt.date, rows: Mapping[str, int]) -> None:
        """The day's rows were published, per table (``scores``, ``traces``, ``quarantine``); none when the day was
        unchanged since the run that published it."""


#: Never named in a flow function's body: Dask pickles the function of the flow run in progress by value, with the
#: globals its code names, and a listener (the CLI's display) holds locks. The functions of this module, which a flow
#: names and Dask pickles by reference, read it.
_listeners: list[EvaluateProgress] = []


@contextmanager
def progress_listener(listener: EvaluateProgress) -> Iterator[None]:
    """Report the progress of the days evaluated in this process to ``listener``. Without one, the flow does nothing
    for progress (a deployment's run registers none)."""
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


def notify(event: str, day: dt.date, *args: Any) -> None:
    """Call ``event`` on every listener of this process."""
    for listener in list(_listeners):
        getattr(listener, event)(day, *args)


class BatchProgress:
    """Reports batches scored as their futures complete, read in the flow's thread. Batch-aligned futures, one list
    per kind of scoring task (an empty list for a kind with nothing to do); ``until`` reports until another future
    is done, ``finish`` until every batch is."""

    def __init__(self, day: dt.date, *per_kind: Sequence[PrefectFuture[Any]], also: PrefectFuture[Any]) -> None:
        self._day = day
        kinds = [futures for futures in per_kind if futures]
        self._of = len(kinds[0]) if kinds else 0
        self._batch = {future: i for futures in kinds for i, future in enumerate(futures)}
        self._left = [len(kinds)] * self._of
        self._cached = [True] * self._of
        self._done = self._n_cached = 0
        self._also = also
        self._completed: Iterator[PrefectFuture[Any]] = as_completed([*self._batch, also]) if _listeners else iter(())
        notify("scoring", day, 0, self._of, 0)

    def until(self, future: PrefectFuture[Any]) -> None:
        for done in self._completed:
            if done is not self._also:
                self._count(done)
            if done is future:
                return

    def finish(self) -> None:
        for done in self._completed:
            if done is not self._also:
                self._count(done)

    def _count(self, future: PrefectFuture[Any]) -> None:
        future.wait()  # sets the future's final state; before that .state may still read Running
        i = self._batch[future]
        self._cached[i] = self._cached[i] and future.state.name == "Cached"
        self._left[i] -= 1
        if not self._left[i]:
            self._done += 1
            self._n_cached += self._cached[i]
            notify("scoring", self._day, self._done, self._of, self._n_cached)


def slice_progress(day: dt.date) -> Callable[[int, int, int], None] | None:
    """What ``stage_day`` calls in the flow's thread as each staging slice is done; None without a listener."""
    if not _listeners:
        return None

    def staged(slices: int, of: int, traces: int) -> None:
        notify("staging", day, slices, of, traces)

    return staged


def notify_published(day: dt.date, publication: Publication) -> None:
    """Tell the listeners the rows of the tables that grow with the day (counted only when there is one)."""
    if _listeners:
        rows = {"scores": publication.scores.num_rows, "traces": publication.traces.num_rows}
        notify("published", day, {**rows, "quarantine": publication.quarantine.num_rows})
