"""Reading artifacts back from the test session's Prefect server, by key."""

from __future__ import annotations

from prefect import get_client
from prefect.client.schemas.filters import ArtifactCollectionFilter, ArtifactCollectionFilterKey


def latest_markdown(key: str) -> str:
    """The latest artifact of `key`, filtered on the server: the session's server holds more keys than one
    unfiltered page (200), so a client-side scan misses some."""
    key_filter = ArtifactCollectionFilter(key=ArtifactCollectionFilterKey(any_=[key]))
    with get_client(sync_client=True) as client:
        (artifact,) = client.read_latest_artifacts(artifact_filter=key_filter)
    return str(artifact.data)
