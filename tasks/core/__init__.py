"""What every room shares: the run configuration, the run's types, errors, object storage access, secrets,
the work directory, code fingerprints and I/O retries."""

__all__: list[str] = []
