"""``scoring.embedding_sample``: how many traces of a day the embedding signals score, and how it is written."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ragpulse.tasks.judge.plan import sampled
from ragpulse.tasks.scoring.config import AUTO_EMBEDDING_TRACES, ScoringConfig


@pytest.mark.parametrize(
    ("setting", "canonical", "rate_of_100k", "rate_of_100"),
    [
        ("auto", "auto", AUTO_EMBEDDING_TRACES / 100_000, 1.0),
        ("AUTO ", "auto", AUTO_EMBEDDING_TRACES / 100_000, 1.0),
        ("all", "all", 1.0, 1.0),
        (5000, "5000", 0.05, 1.0),
        ("5000", "5000", 0.05, 1.0),
        (0.05, "0.05", 0.05, 0.05),
        ("0.25", "0.25", 0.25, 0.25),
        (1.0, "1.0", 1.0, 1.0),
    ],
)
def test_embedding_sample_forms_and_their_share_of_a_day(
    setting: object, canonical: str, rate_of_100k: float, rate_of_100: float
) -> None:
    config = ScoringConfig(embedding_sample=setting)  # type: ignore[arg-type]
    assert config.embedding_sample == canonical
    assert config.embedding_rate(100_000) == pytest.approx(rate_of_100k)
    assert config.embedding_rate(100) == pytest.approx(rate_of_100)


@pytest.mark.parametrize("setting", [0, -5, "0.0", 1.5, "2.5", "some", True, "nan"])
def test_a_bad_embedding_sample_names_the_setting_and_its_forms(setting: object) -> None:
    with pytest.raises(ValidationError, match="embedding_sample must be auto, all, a"):
        ScoringConfig(embedding_sample=setting)  # type: ignore[arg-type]


def test_auto_embeds_about_its_target_and_the_smaller_sample_lies_inside_the_larger() -> None:
    ids = [f"trace-{i}" for i in range(40_000)]
    rate = ScoringConfig().embedding_rate(len(ids))
    embedded = sampled(ids, rate)
    assert abs(int(embedded.sum()) - AUTO_EMBEDDING_TRACES) < 4 * AUTO_EMBEDDING_TRACES**0.5  # binomial spread
    judged = sampled(ids, 0.2)  # the judge's sample_rate: the same hash, so embedded traces are judged too
    assert not (embedded & ~judged).any() and judged.sum() > embedded.sum()
