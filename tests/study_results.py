"""What a results file of chapter 5's study holds, checked the same way for the committed files (tests of the
library) and for a fresh run of the study (tests of the tools)."""

from __future__ import annotations

import pytest

from attn_course.course import study as S
from attn_course.course.chapters import VARIANTS

RUN_KEYS = {"seed", "perplexity", "bleu", "exact_match", "aer_output", "aer_input", "accuracy_output",
            "accuracy_input", "train_cpu_seconds", "parameters"}
LOCAL_KEYS = {"centre_error", "centre_slope"}


def check_schema(results: dict, config: S.StudyConfig) -> None:
    assert results["format"] == S.RESULTS_FORMAT
    assert results["config"]["seeds"] == list(config.seeds)
    assert results["runtime_seconds"] > 0
    for task in ("translation", "reversal"):
        variants = results[task]["variants"]
        length_keys = set(S.length_keys(getattr(config, task).length_bins))
        assert [v["name"] for v in variants] == list(getattr(config, task).variants)
        for variant in variants:
            assert variant["kind"] == VARIANTS[variant["name"]].kind
            assert [run["seed"] for run in variant["runs"]] == list(config.seeds)
            is_local = variant["options"].get("attention", "global") != "global"
            for run in variant["runs"]:
                assert set(run) == RUN_KEYS | (LOCAL_KEYS if is_local else set()) | length_keys
                assert all(run[key] is None or 0 <= run[key] <= 100 for key in length_keys)
                assert run["perplexity"] >= 1 and 0 <= run["bleu"] <= 100 and 0 <= run["exact_match"] <= 1
                for key in ("aer_output", "aer_input", "accuracy_output", "accuracy_input"):
                    assert (run[key] is None) == (variant["kind"] == "plain")
                    assert run[key] is None or 0 <= run[key] <= 1
            for key, stats in variant["summary"].items():
                values = [run[key] for run in variant["runs"]]
                if stats is None:
                    assert None in values
                else:
                    assert stats["mean"] == pytest.approx(sum(values) / len(values))
                    assert stats["std"] >= 0
