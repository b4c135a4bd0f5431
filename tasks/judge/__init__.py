"""The LLM judge, whole in one room: its settings (the judge group of the run configuration) and secrets, the checks
before a run, the judge plan (which metrics it judges, on which sample), the judge-metric task, and the
OpenAI-compatible HTTP client with its persistent call cache, usage ledger and process-wide rate limits."""

from ragpulse.tasks.judge.cache import CACHE_FORMAT, CachedCall, JudgeCache, cache_key, plain_json
from ragpulse.tasks.judge.client import OpenAIJudge, ResponseFormat, retry_after_seconds
from ragpulse.tasks.judge.config import DEFAULT_OPENAI_URL, JudgeConfig, JudgeSecrets, ModelPrice
from ragpulse.tasks.judge.ratelimit import ConcurrencyGate, EndpointLimiter, GlobalRateLimit, TokenBucket, limiter_for
from ragpulse.tasks.judge.usage import MetricUsage, UsageLedger, merge_usage

__all__ = [
    "CACHE_FORMAT",
    "DEFAULT_OPENAI_URL",
    "CachedCall",
    "ConcurrencyGate",
    "EndpointLimiter",
    "GlobalRateLimit",
    "JudgeCache",
    "JudgeConfig",
    "JudgeSecrets",
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
