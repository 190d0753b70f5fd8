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
