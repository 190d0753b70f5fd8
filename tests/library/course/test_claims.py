"""The claims' measured spread as a chapter reads it: the shipped results file, refused when foreign."""

from __future__ import annotations

import json

import pytest

from attn_course.course import claims


def test_the_shipped_measurements_cover_every_claim():
    results = claims.measurements()
    assert set(results["claims"]) == set(claims.CLAIMS)
    assert results["runs"]


def test_a_file_of_another_format_is_refused_by_name(tmp_path):
    path = tmp_path / "robustness.json"
    path.write_text(json.dumps({"format": "something/0"}))
    with pytest.raises(ValueError, match=r"holds format 'something/0', expected 'attn_course.robustness/1'"):
        claims.measurements(path)
    path.write_text("[]")
    with pytest.raises(ValueError, match="holds format 'list'"):
        claims.measurements(path)


def results_with_runs(tmp_path, runs):
    path = tmp_path / "robustness.json"
    path.write_text(json.dumps({"format": claims.RESULTS_FORMAT, "claims": {}, "runs": runs}))
    return path


def test_by_seed_groups_a_claims_values_by_seed_and_skips_runs_without_it(tmp_path):
    path = results_with_runs(tmp_path, [
        {"seed": 2, "claims": {"ch11.bleu_gap": 5.0, "ch11.bahdanau_bleu": 60.0}},
        {"seed": 0, "claims": {"ch11.bleu_gap": 10.0}},
        {"seed": 2, "claims": {"ch11.bleu_gap": 7.5}},
        {"seed": 1, "claims": {}, "error": "AssertionError"},   # a failed run that logged nothing
    ])
    assert claims.by_seed("ch11.bleu_gap", path) == {0: [10.0], 2: [5.0, 7.5]}
    assert list(claims.by_seed("ch11.bleu_gap", path)) == [0, 2]


def test_by_seed_refuses_an_unknown_claim_and_a_foreign_file(tmp_path):
    with pytest.raises(KeyError, match="claim 'ch11.no_such_claim' is unknown"):
        claims.by_seed("ch11.no_such_claim")
    path = tmp_path / "robustness.json"
    path.write_text(json.dumps({"format": "something/0"}))
    with pytest.raises(ValueError, match="holds format 'something/0'"):
        claims.by_seed("ch11.bleu_gap", path)


def test_the_shipped_measurements_give_every_claim_values_for_five_seeds():
    for key in claims.CLAIMS:
        assert sorted(claims.by_seed(key)) == [0, 1, 2, 3, 4], key
