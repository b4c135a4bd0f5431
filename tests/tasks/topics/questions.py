"""Questions of planted topics, in English, Japanese and Chinese: account passwords, order delivery and refunds,
weather forecasts, and a fourth (baking recipes) that the baseline never asks, for a new topic to appear."""

from __future__ import annotations

import numpy as np

__all__ = ["TOPICS", "questions"]

_SERVICES = ["Gmail", "Netflix", "Amazon", "Spotify", "Dropbox", "Slack"]
_CITIES = [("Tokyo", "東京", "东京"), ("Paris", "パリ", "巴黎"), ("Beijing", "北京", "北京"), ("Osaka", "大阪", "大阪")]
_FOODS = [("chocolate", "チョコレート", "巧克力"), ("cheese", "チーズ", "芝士"), ("carrot", "キャロット", "胡萝卜")]

TOPICS: dict[str, list[str]] = {
    "password": [
        "How do I reset my {s} password?", "I forgot my {s} password, how can I change it?",
        "{s}のパスワードをリセットする方法を教えてください", "{s}のパスワードを忘れました",
        "如何重置{s}的密码？", "我忘记了{s}密码怎么办",
    ],
    "delivery": [
        "When will my order {n} be delivered?", "How can I get a refund for order {n}?",
        "注文{n}はいつ配達されますか", "注文{n}の返金をお願いします",
        "我的订单{n}什么时候发货？", "订单{n}怎么申请退款",
    ],
    "weather": [
        "What is the weather forecast for {c0} tomorrow?", "Will it rain in {c0} this weekend?",
        "明日の{c1}の天気予報は？", "週末の{c1}は雨が降りますか",
        "{c2}明天的天气预报怎么样？", "这个周末{c2}会下雨吗",
    ],
    "baking": [
        "How do I bake a {f0} cake at home?", "What oven temperature for a {f0} cake?",
        "{f1}ケーキの焼き方を教えて", "{f1}ケーキはオーブンで何度で焼きますか",
        "怎么在家烤{f2}蛋糕？", "烤{f2}蛋糕需要多少度",
    ],
}  # fmt: skip


def questions(topic: str, n: int, seed: int) -> list[str]:
    """``n`` questions of ``topic``, each template and filler drawn from ``default_rng(seed)``; a third of them in
    each of English, Japanese and Chinese."""
    rng = np.random.default_rng(seed)
    templates = TOPICS[topic]
    made = []
    for _ in range(n):
        template = templates[int(rng.integers(len(templates)))]
        city = _CITIES[int(rng.integers(len(_CITIES)))]
        food = _FOODS[int(rng.integers(len(_FOODS)))]
        made.append(
            template.format(
                s=_SERVICES[int(rng.integers(len(_SERVICES)))],
                n=int(rng.integers(1000, 99999)),
                c0=city[0],
                c1=city[1],
                c2=city[2],
                f0=food[0],
                f1=food[1],
                f2=food[2],
            )
        )
    return made
