"""The release for graded work: notebooks without solution() calls whose set-up cell asks for graded mode,
graded mode's solution() that shows no code, and a grader in whose sandbox no model answer can be run.

The tests that grade (a fork server, real sandboxes) are marked `slow`."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from grading_cases import ROOT

import attn_course_exercises as checks
from attn_course_tools.cli import main
from attn_course_tools.grading import Limits, grade
from attn_course_tools.grading.release import build_release, graded_notebook

LIMITS = Limits(cell_timeout=5.0, total_timeout=60.0, memory_mb=5000, max_output_kb=256)


def cells(path: Path) -> list[tuple[str, str]]:
    return [(c["cell_type"], "".join(c["source"])) for c in json.loads(path.read_text())["cells"]]


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("release")
    assert main(["release", "--out", str(out), "--exercises", str(ROOT / "exercises")]) == 0
    return out


def test_release_has_every_exercise_notebook_and_a_readme(release: Path) -> None:
    names = sorted(p.name for p in release.glob("*.ipynb"))
    assert names == sorted(p.name for p in (ROOT / "exercises").glob("ex[0-9]*.ipynb"))
    assert "graded=True" in (release / "README.md").read_text()


def test_release_notebooks_call_no_solution_and_ask_for_graded_mode(release: Path) -> None:
    for path in release.glob("*.ipynb"):
        chapter = int(path.name[2:4])
        sources = [source for kind, source in cells(path) if kind == "code"]
        assert not any("solution()" in s for s in sources), path.name
        assert f"= checks.chapter({chapter}, graded=True)" in sources[0]
        for i in range(len(checks.chapter(chapter))):
            assert f"q{i + 1}.check()" in sources and f"# q{i + 1}.hint()" in sources


def test_release_keeps_every_exercise_cell_as_the_stub(release: Path) -> None:
    for path in release.glob("*.ipynb"):
        stubs = [s for kind, s in cells(path) if kind == "code" and s.startswith("# EXERCISE ")]
        expected = [f"{e.marker}\n{e.stub_code}".rstrip("\n") for e in checks.chapter(int(path.name[2:4]))]
        assert stubs == expected


def test_release_of_one_chapter_writes_only_that_notebook(tmp_path: Path) -> None:
    written = build_release(tmp_path, chapters=[2], exercises=ROOT / "exercises")
    assert [p.name for p in written] == ["ex02_scoring_functions.ipynb"]


def test_release_reads_the_exercises_folder_of_the_current_folder_and_names_the_option_when_it_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["release", "--out", str(tmp_path / "out"), "--chapter", "2"]) == 2
    assert "--exercises exercises: no such folder" in capsys.readouterr().err
    (tmp_path / "exercises").symlink_to(ROOT / "exercises")
    assert main(["release", "--out", str(tmp_path / "out"), "--chapter", "2"]) == 0
    assert [p.name for p in (tmp_path / "out").glob("*.ipynb")] == ["ex02_scoring_functions.ipynb"]


def test_graded_solution_says_solutions_are_off_and_shows_no_code(capsys: pytest.CaptureFixture[str]) -> None:
    q1 = checks.chapter(1, graded=True)[0]
    q1.solution()
    shown = capsys.readouterr().out
    assert "Solutions are off for graded work" in shown
    assert "def sequence_mask" not in shown and q1.solution_code == ""
    assert checks.chapter(1)[0].solution_code.startswith("def sequence_mask")  # the course's own is intact


def test_graded_check_and_hint_still_work(capsys: pytest.CaptureFixture[str]) -> None:
    q1 = checks.chapter(1, graded=True)[0]
    namespace: dict = {}
    exec(checks.PREAMBLES[1] + checks.EXERCISES["ch1.q1"].solution_code, namespace)
    assert q1.check(namespace["sequence_mask"]).passed
    q1.hint()
    assert "Hint 1 of 3 (ch1.q1" in capsys.readouterr().out


def test_a_release_drops_the_widget_state_a_practice_cell_stored() -> None:
    answer = checks.EXERCISES["ch1.q2"].solution_code.splitlines()[1]
    notebook = {
        "metadata": {"kernelspec": {"name": "python3"}, "widgets": {"state": {"lines": [answer]}}},
        "cells": [{"cell_type": "code", "source": "p", "outputs": [], "execution_count": 1, "metadata": {}}],
    }
    released = graded_notebook(notebook)
    assert "widgets" not in released["metadata"] and answer not in json.dumps(released)
    assert released["metadata"]["kernelspec"] == {"name": "python3"} and "widgets" in notebook["metadata"]


def answered(release: Path, name: str, answers: dict[str, str]) -> dict:
    """A released notebook with the exercise cells whose keys are in `answers` replaced (marker kept)."""
    notebook = json.loads((release / name).read_text())
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and source.startswith("# EXERCISE "):
            key = source.splitlines()[0].split()[-1]
            if key in answers:
                cell["source"] = f"# EXERCISE {key}\n{answers[key]}"
    return notebook


CHEATS = {
    "exec_registry": 'exec(checks.EXERCISES["ch1.q1"].solution_code)\n',
    "exec_chapter": "from attn_course_exercises import chapter\nexec(chapter(1)[0].solution_code)\n",
    "exec_graded": "from attn_course_exercises import chapter\n"
    "exec(chapter(1, graded=True)[0].solution_code)\n",
    "exec_at_call": "def sequence_mask(X, valid_len, value=0):\n"
    "    namespace = {'torch': torch}\n"
    '    exec(checks.EXERCISES["ch1.q1"].solution_code, namespace)\n'
    "    return namespace['sequence_mask'](X, valid_len, value)\n",
    "reference": "def sequence_mask(X, valid_len, value=0):\n"
    '    return checks.EXERCISES["ch1.q1"]._reference({"X": X, "valid_len": valid_len, "value": value})\n',
}


@pytest.fixture(scope="module")
def graded(release: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    folder = tmp_path_factory.mktemp("submissions")
    solved = {key: checks.EXERCISES[key].solution_code for key in ("ch1.q1", "ch1.q2", "ch1.q3")}
    submissions = {"honest": solved}
    for name, cheat in CHEATS.items():
        submissions[name] = dict(solved, **{"ch1.q1": "import attn_course_exercises as checks\n" + cheat})
    for name, answers in submissions.items():
        notebook = answered(release, "ex01_masked_softmax.ipynb", answers)
        (folder / f"{name}.ipynb").write_text(json.dumps(notebook))
    out = folder / "grades.csv"
    grade(sorted(folder.glob("*.ipynb")), out=out, limits=LIMITS, id_from="file")
    with out.open() as f:
        return {row["student"]: row for row in csv.DictReader(f)}


@pytest.mark.slow
def test_a_released_notebook_answered_correctly_gets_full_marks(graded: dict) -> None:
    assert graded["honest"]["ch1.q1"] == "1" and graded["honest"]["total"] == "3"


@pytest.mark.slow
@pytest.mark.parametrize("cheat", list(CHEATS))
def test_a_cell_that_runs_the_model_answer_scores_zero(graded: dict, cheat: str) -> None:
    assert graded[cheat]["ch1.q1"] == "0", cheat
    assert graded[cheat]["ch1.q2"] == graded[cheat]["ch1.q3"] == "1"  # only the exercise that cheated


CHAPTER_6_CHEATS = {
    "checks_reference": "def beam_step(beam_scores, log_probs, beam_size):\n"
    "    from attn_course_exercises.ch6_decoding import _beam_step\n"
    "    inputs = {'beam_scores': beam_scores, 'log_probs': log_probs, 'beam_size': beam_size}\n"
    "    return _beam_step(inputs)\n",
    "package_helper": "def greedy_decode(model, src, src_valid_lens, *, bos, eos, max_len):\n"
    "    from attn_course.models import decoding\n"
    "    limits = [max_len] * src.shape[0]\n"
    "    return [h.tokens for h in decoding._greedy_search(model, src, src_valid_lens, bos, eos, limits)]\n",
}


@pytest.mark.slow
def test_a_cell_that_calls_the_checks_or_package_helpers_scores_zero(release: Path, tmp_path: Path) -> None:
    solved = {key: checks.EXERCISES[key].solution_code for key in ("ch6.q1", "ch6.q2", "ch6.q3")}
    cheat = dict(solved, **{"ch6.q2": CHAPTER_6_CHEATS["checks_reference"]})
    cheat["ch6.q1"] = CHAPTER_6_CHEATS["package_helper"]
    for name, answers in {"honest": solved, "cheat": cheat}.items():
        notebook = answered(release, "ex06_decoding.ipynb", answers)
        (tmp_path / f"{name}.ipynb").write_text(json.dumps(notebook))
    out = tmp_path / "grades.csv"
    results = grade(sorted(tmp_path.glob("*.ipynb")), out=out, limits=LIMITS, id_from="file")
    with out.open() as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    assert rows["honest"]["total"] == "3"
    assert (rows["cheat"]["ch6.q1"], rows["cheat"]["ch6.q2"], rows["cheat"]["ch6.q3"]) == ("0", "0", "1")
    message = {r.student: r for r in results}["cheat"].exercises["ch6.q2"].message
    assert "calls the course's own" in message and "write it yourself" in message
