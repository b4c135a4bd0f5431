"""Terms that name topics: Chinese and Japanese segmented into words or bigrams of content characters, stop words
of the major languages dropped."""

from __future__ import annotations

import pytest
from scipy.stats import norm

from ragpulse.metrics.topics import class_tf_idf, share_test
from ragpulse.tasks.topics.terms import terms_of


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("如何重置我的密码？", ["重置", "密码"]),
        ("我的订单什么时候发货", ["订单", "发货"]),
        # Bigrams across a word boundary (末北, 京会) stay: no dictionary says where it is; c-TF-IDF ranks them low.
        ("这个周末北京会下雨吗", ["周末", "末北", "北京", "京会", "会下", "下雨"]),
        ("パスワードを忘れました", ["パスワード"]),
        ("明日の東京の天気予報は？", ["明日", "東京", "天気", "気予", "予報"]),
        ("ﾊﾟｽﾜｰﾄﾞを変更したい", ["パスワード", "変更"]),
        ("How do I reset my Netflix password?", ["reset", "netflix", "password"]),
        ("Wie kann ich mein Passwort zurücksetzen?", ["passwort", "zurücksetzen"]),
        ("¿Cómo puedo cambiar mi contraseña?", ["cambiar", "contraseña"]),
        ("Comment réinitialiser mon mot de passe ?", ["réinitialiser", "mot", "passe"]),
    ],
)
def test_terms_are_words_or_content_bigrams_without_stop_words(text: str, expected: list[str]) -> None:
    assert terms_of(text) == expected


def test_japanese_particles_and_chinese_function_characters_never_become_terms() -> None:
    terms = terms_of("返品の方法を教えてください。我的订单的发票在哪里？")
    assert terms == ["返品", "订单", "发票", "票在"]
    assert not any(char in term for term in terms for char in "のをてください的")


def test_a_topic_is_named_by_what_its_members_share_and_the_others_lack() -> None:
    documents = [terms_of(q) for q in ["如何重置密码", "忘记密码了", "重置网银密码", "订单什么时候发货", "订单发货慢"]]
    names = class_tf_idf(documents, [0, 0, 0, 1, 1], top=2)
    assert names == {0: ["密码", "重置"], 1: ["发货", "订单"]}


def test_the_share_test_is_the_pooled_two_proportion_z_test() -> None:
    # 40 of 400 then, 30 of 100 now: pooled p = 70/500, z = 0.2 / sqrt(0.14 * 0.86 * (1/400 + 1/100)).
    result = share_test(40, 400, 30, 100, confidence=0.95)
    z = 0.2 / (0.14 * 0.86 * (1 / 400 + 1 / 100)) ** 0.5
    assert result.delta == pytest.approx(0.2)
    assert result.p_value == pytest.approx(2 * norm.sf(z), rel=1e-9)
    half = norm.ppf(0.975) * (0.1 * 0.9 / 400 + 0.3 * 0.7 / 100) ** 0.5
    assert (result.ci_low, result.ci_high) == (pytest.approx(0.2 - half), pytest.approx(0.2 + half))
    assert share_test(10, 100, 10, 100, confidence=0.95).p_value == pytest.approx(1.0)
