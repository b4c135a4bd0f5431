"""The LLM judge as a service: an OpenAI-compatible HTTP client with its settings, a persistent call cache,
a usage ledger and process-wide rate limits."""

from ragpulse.tasks.judge.cache import CACHE_FORMAT, CachedCall, JudgeCache, cache_key, plain_json
from ragpulse.tasks.judge.client import OpenAIJudge, ResponseFormat, retry_after_seconds
from ragpulse.tasks.judge.ratelimit import ConcurrencyGate, EndpointLimiter, GlobalRateLimit, TokenBucket, limiter_for
from ragpulse.tasks.judge.settings import DEFAULT_OPENAI_URL, JudgeSettings, ModelPrice
from ragpulse.tasks.judge.usage import MetricUsage, UsageLedger, merge_usage

__all__ = [
    "CACHE_FORMAT",
    "DEFAULT_OPENAI_URL",
    "CachedCall",
    "ConcurrencyGate",
    "EndpointLimiter",
    "GlobalRateLimit",
    "JudgeCache",
    "JudgeSettings",
    "MetricUsage",
    "ModelPrice",
    "OpenAIJudge",
    "ResponseFormat",
    "TokenBucket",
    "UsageLedger",
    "cache_key",
    "limiter_for",
    "merge_usage",
    "plain_json",
    "retry_after_seconds",
]
