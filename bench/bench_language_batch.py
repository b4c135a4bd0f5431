"""CPU per text of ragpulse's language identification before and after it scored batches (issue 33), in one run.

"Before" is ``tasks/ingest/language.py`` as of ``--before`` (default: the last commit that classified one text at a
time), loaded from git beside the current module, both called as staging calls them: ``identify_languages`` on a
list of texts. Three lists, every text distinct within it, so no text is remembered from an earlier call:

- ``en``: 5,000 English questions, ARES NQ and HotpotQA's synthetic queries, each with 3 to 6 words of its own
  passage appended in brackets as bench_floor's distinct day does;
- ``mix``: 3,000 of those, 1,000 JSQuAD (ja) and 1,000 CMRC 2018 (zh) questions varied the same way (a run of 4 to 8
  passage characters), shuffled;
- ``en repeated``: 500 of the English questions 10 times over (what the per-process memory of texts saves).

Each timing is the best of ``--repeat`` runs of process CPU, the remembered texts forgotten before each, the model
loaded before any clock. Both versions' tags are compared on every text, and the count of texts the batched path
left to py3langid's ``classify`` (a tag within rounding of a tie or of the threshold) is reported::

    .venv/bin/python bench/bench_language_batch.py     # about a minute; writes bench/results/language_batch.json
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import os
import platform
import random
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
DATASETS = ROOT.parent / "shared" / "datasets"

from bench._common import cpu_model  # noqa: E402
from ragpulse.tasks.ingest import language  # noqa: E402

BEFORE = "73d567c"
"""The last commit whose ``identify_languages`` classified one text at a time."""

_WORD = re.compile(r"\w{3,}")


def _module_at(commit: str) -> ModuleType:
    """``tasks/ingest/language.py`` as of ``commit``, imported under another name."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{commit}:tasks/ingest/language.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    spec = importlib.util.spec_from_loader("language_before", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, f"{commit}:tasks/ingest/language.py", "exec"), module.__dict__)
    return module


def _english(rng: random.Random) -> list[str]:
    """ARES questions with words of their own passage appended, distinct, in file order."""
    csv.field_size_limit(1 << 30)
    texts: dict[str, None] = {}
    for name in ("nq", "hotpotqa"):
        with (DATASETS / "ares" / f"{name}_synthetic_queries.tsv").open(encoding="utf-8", newline="") as handle:
            for row in csv.DictReader(handle, delimiter="\t"):
                question, words = row["synthetic_query"] or "", _WORD.findall(row["document"] or "")
                if question and words:
                    texts[f"{question} ({' '.join(rng.sample(words, min(len(words), rng.randint(3, 6))))})"] = None
    return list(texts)


def _squad(path: Path, rng: random.Random, n: int) -> list[str]:
    """``n`` distinct questions of a SQuAD-layout file, each with a run of its passage's characters appended."""
    pairs = [
        (qa["question"], paragraph["context"])
        for article in json.loads(path.read_text(encoding="utf-8"))["data"]
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
    ]
    texts: dict[str, None] = {}
    while len(texts) < n:
        question, context = rng.choice(pairs)
        start = rng.randrange(max(1, len(context) - 8))
        texts[f"{question}（{context[start : start + rng.randint(4, 8)]}）"] = None
    return list(texts)


def _cpu_per_text(
    identify: Callable[[list[str]], Any], forget: Callable[[], None], texts: list[str], repeat: int
) -> float:
    """Best process CPU µs per text of ``identify(texts)``, nothing remembered at the start of each run."""
    runs = []
    for _ in range(repeat):
        forget()
        start = time.process_time()
        identify(texts)
        runs.append(time.process_time() - start)
    return min(runs) / len(texts) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default=BEFORE, help="commit of the one-text-at-a-time version")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "language_batch.json")
    args = parser.parse_args()

    rng = random.Random(33)
    english = _english(rng)[:5000]
    mix = (
        english[:3000]
        + _squad(DATASETS / "jsquad" / "jsquad-v1.3-valid-first-articles.json", rng, 1000)
        + _squad(DATASETS / "cmrc2018" / "cmrc2018-dev-first-articles.json", rng, 1000)
    )
    rng.shuffle(mix)
    lists = {"en": english, "mix": mix, "en repeated": english[:500] * 10}

    before = _module_at(args.before)
    before.identify_language("Where is the station?")  # each loads its model before any clock
    language.identify_language("Where is the station?")
    rechecked = 0
    identifier_type = type(language._identifier())
    classify = identifier_type.classify

    def counted(self: Any, text: str) -> Any:
        nonlocal rechecked
        rechecked += 1
        return classify(self, text)

    rows = []
    for name, texts in lists.items():
        rechecked = 0
        identifier_type.classify = counted  # the batched path calls it only for texts it leaves to classify
        after_tags = language.identify_languages(texts)
        identifier_type.classify = classify
        language._remembered.clear()
        row = {
            "list": name,
            "texts": len(texts),
            "distinct": len(set(texts)),
            "same_tags": sum(a == b for a, b in zip(before.identify_languages(texts), after_tags, strict=True)),
            "left_to_classify": rechecked,
            "before_cpu_us_per_text": round(
                _cpu_per_text(before.identify_languages, before._identified.cache_clear, texts, args.repeat), 2
            ),
            "after_cpu_us_per_text": round(
                _cpu_per_text(language.identify_languages, language._remembered.clear, texts, args.repeat), 2
            ),
        }
        row["ratio"] = round(row["before_cpu_us_per_text"] / row["after_cpu_us_per_text"], 2)
        rows.append(row)
        print(row, flush=True)

    report = {
        "python": platform.python_version(),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "load_average": os.getloadavg(),
        "before": args.before,
        "chunk": language._CHUNK,
        "results": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
