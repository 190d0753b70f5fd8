"""The grading pipeline reads each submission file exactly once: collect, read, identify, judge and write
work on the content read (`reading.Submission`), the grade cache and the similarity report included.
Every file opened in this process is noted by an audit hook (Python's ``open`` event, which
``open``, ``Path.read_bytes`` and ``os.open`` all raise); the sandboxes run in other processes and are
handed the exercise cells, never the file."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from grading_cases import LIMITS, WRONG_Q1, notebook, write

from attn_course_tools.grading import grade

#: The files opened while a test watches (None: nobody watches). The hook stays for the session, as audit
#: hooks do; it notes nothing unless a test watches.
_opened: list[str] | None = None
_hooked = False


def _note_opens(event: str, args: tuple) -> None:
    if event == "open" and _opened is not None and isinstance(args[0], (str, bytes, os.PathLike)):
        _opened.append(os.path.realpath(os.fsdecode(args[0])))


@pytest.fixture
def opened() -> Iterator[list[str]]:
    """The real paths of the files opened in this process while the test runs."""
    global _opened, _hooked
    if not _hooked:
        sys.addaudithook(_note_opens)
        _hooked = True
    _opened = []
    try:
        yield _opened
    finally:
        _opened = None


def with_student(content: dict, student: str) -> dict:
    return dict(content, metadata=dict(content.get("metadata", {}), attn_course={"student": student}))


def reads(opened: list[str], files: list[Path]) -> dict[str, int]:
    counts = Counter(opened)
    return {f.name: counts[os.path.realpath(f)] for f in files}


def test_a_class_that_answers_no_exercise_is_read_once_per_file_even_from_the_cache(
    tmp_path: Path, opened: list[str]
) -> None:
    """Without a sandbox: collect, the metadata's student ids, the columns, the cache, the writers."""
    folder = tmp_path / "class"
    folder.mkdir()
    files = [
        write(folder, "a", with_student({"cells": [], "metadata": {}}, "alice")),
        write(folder, "b", with_student({"cells": [], "metadata": {}}, "bob")),
        write(folder, "broken", "{not json"),
    ]
    kwargs = {"out": tmp_path / "g.csv", "limits": LIMITS, "id_from": "metadata", "cache": tmp_path / "c"}
    opened.clear()  # writing them above opened them too
    first = grade([folder], **kwargs)
    assert reads(opened, files) == {"a.ipynb": 1, "b.ipynb": 1, "broken.ipynb": 1}
    opened.clear()
    second = grade([folder], **kwargs)
    assert [r.cached for r in second] == [True, True, True] and len(first) == 3
    assert reads(opened, files) == {"a.ipynb": 1, "b.ipynb": 1, "broken.ipynb": 1}


@pytest.mark.slow
def test_grading_a_class_reads_each_submission_file_exactly_once(tmp_path: Path, opened: list[str]) -> None:
    folder = tmp_path / "class"
    folder.mkdir()
    files = [
        write(folder, "ex01_alice", with_student(notebook(), "alice")),
        write(folder, "ex01_bob", with_student(notebook({"ch1.q1": WRONG_Q1}), "bob")),
        write(folder, "ex01_carol", with_student(notebook(solved=False), "carol")),
    ]
    opened.clear()  # writing them above opened them too
    results = grade([folder], out=tmp_path / "g.csv", limits=LIMITS, id_from="metadata", cache=tmp_path / "c")
    assert [r.total for r in results] == [3, 2, 0]
    assert reads(opened, files) == {f.name: 1 for f in files}
    assert json.loads(files[0].read_text())["cells"]  # the files are untouched
