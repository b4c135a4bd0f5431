"""Issue 16, fault 3: every place a password can sit in a URL is masked, and configuration refuses URLs that would
carry one into runs rows and Prefect parameters."""

from __future__ import annotations

import pytest
from fastapi.encoders import jsonable_encoder

from ragpulse.tasks.config import JudgeConfig, OutputConfig, RunConfig, SourceConfig
from ragpulse.tasks.core.storage import redact_url


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://u@db/w?password=hunter2&sslmode=require", "postgresql://u@db/w?password=***&sslmode=require"),
        ("postgresql://u@db/w?sslmode=verify-full&sslpassword=hunter2", "postgresql://u@db/w?sslmode=verify-full&sslpassword=***"),
        ("postgresql://u:hun/ter2@db/w?schema=s", "postgresql://u:***@db/w?schema=s"),
        ("postgresql://u:hun@ter2@db/w", "postgresql://u:***@db/w"),
        ("https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIA&X-Amz-Signature=hunter2&x=1",
         "https://b.s3.amazonaws.com/k?X-Amz-Credential=***&X-Amz-Signature=***&x=1"),
        ("https://judge/v1?api_key=hunter2", "https://judge/v1?api_key=***"),
        ("https://judge/v1?access_token=hunter2#top", "https://judge/v1?access_token=***#top"),
        ("s3://bucket/key:with@signs?versionId=3", "s3://bucket/key:with@signs?versionId=3"),
    ],
)  # fmt: skip
def test_redact_url_masks_query_and_userinfo_passwords(url: str, expected: str) -> None:
    assert redact_url(url) == expected
    assert "hunter2" not in redact_url(url) and "ter2" not in redact_url(url)


def test_the_warehouse_password_never_reaches_json() -> None:
    """Prefect stores flow parameters as ``jsonable_encoder`` output; the flow in this process keeps the URL."""
    url = "postgresql://u:hunter2@db/w?schema=s"
    config = RunConfig(source=SourceConfig(url="s3://logs"), output=OutputConfig(warehouse=url))
    assert config.output.warehouse == url
    encoded = jsonable_encoder(config)
    assert encoded["output"]["warehouse"] == "postgresql://u:***@db/w?schema=s"
    assert "hunter2" not in str(encoded) and "hunter2" not in config.model_dump_json()


@pytest.mark.parametrize(
    "build",
    [
        lambda: SourceConfig(url="s3://AKIA:hunter2@logs/rag"),
        lambda: OutputConfig(work_dir="https://u:hunter2@host/work"),
        lambda: JudgeConfig(base_url="http://u:hunter2@judge/v1"),
        lambda: JudgeConfig(base_url="http://judge/v1?api_key=hunter2"),
    ],
    ids=["source", "work_dir", "judge userinfo", "judge query"],
)
def test_settings_refuse_urls_with_a_password(build: object) -> None:
    with pytest.raises(ValueError, match="must not carry a password or token") as caught:
        build()  # type: ignore[operator]
    assert "hunter2" not in caught.value.errors()[0]["msg"]  # type: ignore[attr-defined]
