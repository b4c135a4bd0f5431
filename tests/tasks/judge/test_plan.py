"""Planning and sampling of the judge metrics (the task itself runs in tests/flows/test_judge_flow.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ragpulse.tasks.core.exceptions import ConfigError
from ragpulse.tasks.judge.plan import load_judge_options, plan_judging, sampled


def test_sampling_is_deterministic_by_trace_id_and_close_to_the_rate() -> None:
    ids = [f"trace-{i}" for i in range(20_000)]
    first, again = sampled(ids, 0.1), sampled(list(reversed(ids)), 0.1)[::-1]
    assert np.array_equal(first, again)
    assert 0.09 < first.mean() < 0.11
    assert sampled(ids, 1.0).all()
    # A smaller rate picks a subset of a larger one: raising the rate never drops a judged trace.
    assert not (sampled(ids, 0.05) & ~first).any()


def test_plan_skips_llm_metrics_without_a_judge_but_keeps_embedding_metrics() -> None:
    names = ["document_mrr", "faithfulness", "answer_semantic_similarity", "aspect_critique:harmfulness"]
    without = plan_judging(names, None, {})
    assert without.plain == ["document_mrr"]
    assert without.judged == ["answer_semantic_similarity"]
    assert without.skipped == ["faithfulness", "aspect_critique:harmfulness"]
    assert without.judge_model is None
    with_judge = plan_judging(names, "judge-small", {})
    assert with_judge.skipped == [] and with_judge.names == names[:1] + names[1:]
    assert with_judge.prompt_versions["faithfulness"] == "faithfulness/3"


def test_judge_options_come_from_toml_or_json(tmp_path: Path) -> None:
    toml = tmp_path / "judges.toml"
    toml.write_text('[aspects]\nfriendly = "Is the answer friendly?"\n')
    assert load_judge_options(str(toml)) == {"aspects": {"friendly": "Is the answer friendly?"}}
    assert plan_judging(["aspect_critique:friendly"], "m", load_judge_options(str(toml))).judged == [
        "aspect_critique:friendly"
    ]
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="must hold a table/object"):
        load_judge_options(str(bad))
    with pytest.raises(ConfigError, match="cannot read judge config"):
        load_judge_options(str(tmp_path / "missing.toml"))
