"""The multi-seed studies run over seeds by the tools: a reduced run of chapter 5's study through the command
line, its schema and its reproducibility; chapter 9's study runs every variant with every seed, in order."""

from __future__ import annotations

import pytest
from study_results import check_schema

from attn_course.course import dynamics
from attn_course.course import study as S
from attn_course_tools import studies


@pytest.fixture(scope="module")
def quick_results(tmp_path_factory) -> dict:
    """The reduced study (tiny sizes, 1 epoch, 2 variants per task, 2 seeds), run through the command line."""
    out = tmp_path_factory.mktemp("study") / "quick.json"
    assert studies.main(["luong", "--quick", "--out", str(out), "--workers", "1"]) == 0
    return S.load_results(out)


def test_quick_study_writes_the_documented_schema(quick_results):
    check_schema(quick_results, S.QUICK)


def test_quick_study_is_reproducible_for_a_seed(quick_results):
    run = quick_results["translation"]["variants"][0]["runs"][0]
    again = S.run_one(S.QUICK.translation, quick_results["translation"]["variants"][0]["name"], run["seed"])
    for key in ("perplexity", "bleu", "aer_output"):
        assert again[key] == pytest.approx(run[key], rel=1e-5)


def test_quick_study_scores_bleu_per_source_length(quick_results):
    keys = S.length_keys(S.QUICK.translation.length_bins)
    run = quick_results["translation"]["variants"][0]["runs"][0]
    assert [key for key in run if key.startswith("bleu_src_")] == keys
    assert all(key not in run for run in quick_results["reversal"]["variants"][0]["runs"] for key in keys)


def test_each_study_is_a_sub_command_that_needs_an_output_file(capsys):
    for study in ("luong", "dynamics", "diagnosis"):
        with pytest.raises(SystemExit):
            studies.main([study])
        assert "--out" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        studies.main(["luong", "--quick", "--by-length", "--out", "x.json"])


def fake_run(seed, variant, device="cpu"):
    return {"seed": seed, "variant": variant, "bleu": float(seed)}


@pytest.mark.parametrize("workers", [1, 2])
def test_the_seed_study_runs_every_variant_with_every_seed_in_order_and_reports_as_it_goes(workers,
                                                                                        monkeypatch):
    monkeypatch.setattr(dynamics, "study_run", fake_run)
    seen = []
    results = studies.dynamics_study([3, 5], workers=workers,
                                      on_run=lambda partial: seen.append(len(partial["runs"])))
    expected = [(seed, name) for seed in (3, 5) for name in dynamics.STUDY]
    assert [(r["seed"], r["variant"]) for r in results["runs"]] == expected
    assert seen == list(range(1, len(expected) + 1))
    assert results["seeds"] == [3, 5] and results["config"]["baselines"] == dynamics.BASELINES
    assert results["config"]["task"]["max_len"] == dynamics.TASK.max_len
