"""What every room shares: the run's types, errors, object storage access, secrets, the work directory, code
fingerprints and I/O retries. It imports no other room (tests/tasks/test_layout.py)."""

__all__: list[str] = []
