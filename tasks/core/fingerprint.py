"""Fingerprints of the code behind a cached result, so that any code change recomputes."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path
from types import ModuleType

__all__ = ["code_fingerprint", "digest"]


@cache
def code_fingerprint(*modules: ModuleType) -> str:
    """SHA-256 over the source files of ``modules``; a package counts with every ``.py`` file in it.

    A comment edit recomputes too: a needless recomputation is cheap, a stale score is not.
    """
    hasher = hashlib.sha256()
    for module in modules:
        origin = Path(module.__file__ or "")
        files = sorted(origin.parent.rglob("*.py")) if origin.name == "__init__.py" else [origin]
        for path in files:
            hasher.update(path.as_posix().encode().rsplit(b"/", 2)[-1])
            hasher.update(path.read_bytes())
    return hasher.hexdigest()[:16]


def digest(*parts: object) -> str:
    return hashlib.sha256("\x1f".join(str(part) for part in parts).encode()).hexdigest()[:24]
