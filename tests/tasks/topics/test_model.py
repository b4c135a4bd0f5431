"""The topic model on the real multilingual encoder: three planted topics asked in English, Japanese and Chinese are
found as three topics, a new day is assigned to them, a new kind of question becomes a candidate, a refit keeps the
ids, and the stored rows give back the same model."""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pytest
from numpy.typing import NDArray

from ragpulse.tasks.embeddings.models import DEFAULT_EMBEDDING_MODEL
from ragpulse.tasks.topics.config import TopicsConfig
from ragpulse.tasks.topics.model import UNASSIGNED, TopicModel, cluster_candidates, fit_model
from ragpulse.tasks.topics.tasks import embed_questions
from tests.tasks.topics.questions import questions

pytestmark = pytest.mark.slow  # the encoder

FIT_DAY = dt.date(2026, 11, 8)
BASELINE = (dt.date(2026, 11, 1), dt.date(2026, 11, 7))
PLANTED = ("password", "delivery", "weather")
SETTINGS = TopicsConfig()


def language(question: str) -> str:
    """What ragpulse's language detection gives these questions (kana: Japanese; Han alone: Chinese)."""
    if re.search(r"[\u3040-\u30ff]", question):
        return "ja"
    return "zh-Hans" if re.search(r"[\u4e00-\u9fff]", question) else "en"


@dataclass(frozen=True)
class Asked:
    questions: list[str]
    truth: list[str]
    embeddings: NDArray[np.float64]

    @property
    def languages(self) -> list[str]:
        return [language(q) for q in self.questions]


def ask(counts: dict[str, int], seed: int) -> Asked:
    made, truth = [], []
    for offset, (topic, n) in enumerate(counts.items()):
        made += questions(topic, n, seed + offset)
        truth += [topic] * n
    return Asked(made, truth, embed_questions(made, DEFAULT_EMBEDDING_MODEL))


@pytest.fixture(scope="module")
def baseline() -> Asked:
    return ask(dict.fromkeys(PLANTED, 60), seed=0)


@pytest.fixture(scope="module")
def model(baseline: Asked) -> TopicModel:
    return fit_model(
        baseline.questions, baseline.embeddings, baseline.languages, fit_date=FIT_DAY, baseline=BASELINE,
        settings=SETTINGS,
    )  # fmt: skip


def topic_of(model: TopicModel, asked: Asked) -> dict[str, int]:
    """Each planted topic's most frequent topic id under ``model``."""
    ids = model.assign(model.center(asked.embeddings, asked.languages)).topic_ids
    return {
        planted: Counter(int(i) for i, t in zip(ids, asked.truth, strict=True) if t == planted).most_common(1)[0][0]
        for planted in PLANTED
    }


def test_three_planted_topics_in_three_languages_are_three_topics(baseline: Asked, model: TopicModel) -> None:
    assert [topic.topic_id for topic in model.topics] == [0, 1, 2]
    ids = model.assign(model.center(baseline.embeddings, baseline.languages)).topic_ids
    for topic in model.topics:
        members = [
            (t, language(q)[:2])
            for i, t, q in zip(ids, baseline.truth, baseline.questions, strict=True)
            if i == topic.topic_id
        ]
        planted = Counter(t for t, _ in members)
        assert planted.most_common(1)[0][1] == len(members), f"topic {topic.name} mixes {planted}"
        assert {lang for _, lang in members} == {"en", "ja", "zh"}
    # Each planted topic is one topic, and its radius leaves about 1 - distance_quantile of its members outside.
    assert len(set(topic_of(model, baseline).values())) == 3
    assert 0.0 < (ids == UNASSIGNED).mean() <= 0.10


def test_topics_are_named_by_their_terms_in_each_language(model: TopicModel) -> None:
    vocabulary = {
        "password": {"password", "密码", "パスワード", "reset", "重置", "forgot", "忘记", "リセット"},
        "delivery": {"order", "订单", "注文", "refund", "退款", "返金", "delivered", "発送", "配達", "发货"},
        "weather": {
            "weather",
            "天气",
            "天気",
            "rain",
            "下雨",
            "forecast",
            "予報",
            "预报",
            "明天",
            "明日",
            "周末",
            "週末",
        },
    }
    for topic in model.topics:
        (planted,) = [name for name, words in vocabulary.items() if len(set(topic.terms[:3]) & words) >= 2]
        assert topic.name == " · ".join(topic.terms[:3])
        # Its first ten terms hold the topic's word in each language.
        assert len(set(topic.terms) & vocabulary[planted]) >= 4
        for term in topic.terms:
            assert not re.fullmatch(r"[\u3040-\u309f]+", term), f"hiragana-only term {term!r}"
            assert not re.search(r"[的了吗呢]", term), f"Chinese function character in {term!r}"
            assert len(term) <= 2 or not re.fullmatch(r"[\u4e00-\u9fff]+", term), f"unsegmented Han run {term!r}"


def test_a_new_day_of_the_same_topics_is_assigned_to_them(baseline: Asked, model: TopicModel) -> None:
    day = ask(dict.fromkeys(PLANTED, 30), seed=100)
    ids = model.assign(model.center(day.embeddings, day.languages)).topic_ids
    expected = topic_of(model, baseline)
    right = sum(int(i) == expected[t] for i, t in zip(ids, day.truth, strict=True))
    wrong = sum(int(i) not in (expected[t], UNASSIGNED) for i, t in zip(ids, day.truth, strict=True))
    assert right >= 0.85 * len(ids)
    assert wrong == 0


def test_a_new_kind_of_question_is_a_candidate_not_a_topic(model: TopicModel) -> None:
    day = ask({"password": 30, "delivery": 30, "baking": 30}, seed=200)
    embeddings = model.center(day.embeddings, day.languages)
    assignment = model.assign(embeddings)
    baking = np.array([t == "baking" for t in day.truth])
    assert (assignment.topic_ids[baking] == UNASSIGNED).all()
    assert assignment.distances[baking].min() > max(topic.threshold for topic in model.topics)
    unassigned = assignment.topic_ids == UNASSIGNED
    candidates = cluster_candidates(embeddings[unassigned], SETTINGS)
    largest = candidates == 0
    assert largest.sum() >= SETTINGS.min_topic_size
    assert baking[unassigned][largest].mean() >= 0.9
    assert baking[unassigned][largest].sum() == 30


def test_a_refit_keeps_the_ids_of_the_topics_it_finds_again(baseline: Asked, model: TopicModel) -> None:
    later = ask({"weather": 50, "password": 40, "delivery": 40, "baking": 40}, seed=300)
    refit_day = FIT_DAY + dt.timedelta(days=28)
    refit = fit_model(
        later.questions, later.embeddings, later.languages, fit_date=refit_day,
        baseline=(refit_day - dt.timedelta(days=7), refit_day - dt.timedelta(days=1)), settings=SETTINGS,
        previous=model,
    )  # fmt: skip
    before, after = topic_of(model, baseline), topic_of(refit, later)
    assert after == before
    (new,) = [topic for topic in refit.topics if topic.topic_id not in before.values()]
    assert new.topic_id == 3 and new.created_date == refit_day
    assert {t.created_date for t in refit.topics if t.topic_id != 3} == {FIT_DAY}
    assert {"蛋糕", "ケーキ", "cake"} & set(new.terms)


def test_the_stored_rows_are_the_model(baseline: Asked, model: TopicModel) -> None:
    now = dt.datetime(2026, 11, 8, 6, tzinfo=dt.UTC)
    table = model.to_table("run-1", now)
    stored = TopicModel.latest(table, FIT_DAY + dt.timedelta(days=3))
    assert stored is not None and TopicModel.latest(table, FIT_DAY - dt.timedelta(days=1)) is None
    assert [(t.topic_id, t.name, t.size) for t in stored.topics] == [(t.topic_id, t.name, t.size) for t in model.topics]
    a = model.assign(model.center(baseline.embeddings, baseline.languages))
    b = stored.assign(stored.center(baseline.embeddings, baseline.languages))
    assert np.array_equal(a.topic_ids, b.topic_ids)
    assert np.allclose(a.distances, b.distances, atol=1e-5)
