"""Reference fishing: in the grader's sandbox, learner code that reaches the course's own implementations or
the checks' references as objects -- by gc, sys.modules, frames, importlib under a computed name, inspect,
closures of the checks, or by handing one in as the answer -- scores 0 on that exercise with a reason the
teacher can read, in every layout (folder, file, nbgrader, Canvas, Moodle) and with two jobs; an honest
student in the same class gets every point. The frame rules of `attn_course_tools.grading.guard` are tested
without a sandbox."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from types import FrameType

import pytest
import torch
from grading_cases import LIMITS, ROOT, notebook, place, student_of, write

import attn_course.attention.masking as masking
import attn_course_exercises as checks
from attn_course_tools.grading import grade, sandbox_child
from attn_course_tools.grading.guard import by_learner, codes_of

#: Finds the original that the sandbox's switched-off wrapper `wrapper` keeps in its closure.
ORIGINAL = """
def _original(wrapper):
    return next(c.cell_contents for c in wrapper.__closure__ if callable(c.cell_contents))
"""

#: {student: (exercise, cell)}: each cheater fishes one way; the exercise must score 0.
CHEATERS = {
    "by_gc": (
        "ch1.q1",
        "import gc\n\n\ndef sequence_mask(X, valid_len, value=0):\n"
        "    found = [o for o in gc.get_objects() if getattr(o, '__name__', '') == 'sequence_mask'\n"
        "             and getattr(o, '__module__', '') == 'attn_course.attention.masking']\n"
        "    return found[-1](X, valid_len, value)\n",
    ),
    "by_sys_modules": (
        "ch1.q2",
        "import sys\n\n\ndef masked_softmax(scores, valid_lens=None):\n"
        "    layers = sys.modules['attn_course.attention.layers']\n"
        "    return layers.masked_softmax_unchecked(scores, valid_lens)\n",
    ),
    "by_getframe": (
        "ch1.q1",
        "import inspect\n\n\ndef sequence_mask(X, valid_len, value=0):\n"
        "    frame = inspect.currentframe().f_back\n"
        "    found = frame.f_globals['resolve']('attn_course.attention.masking.sequence_mask')\n"
        "    return found(X, valid_len, value)\n",
    ),
    "by_traceback": (
        "ch1.q1",
        ORIGINAL + "\n\ndef sequence_mask(X, valid_len, value=0):\n"
        "    try:\n        raise KeyError\n    except KeyError as error:\n"
        "        frame = error.__traceback__.tb_frame\n"
        "    while 'sys' not in frame.f_globals:\n        frame = frame.f_back\n"
        "    masking = frame.f_globals['sys'].modules['attn_course.attention.masking']\n"
        "    return _original(masking.sequence_mask)(X, valid_len, value)\n",
    ),
    "by_importlib": (
        "ch1.q1",
        "import importlib\n"
        + ORIGINAL
        + "\n\nmasking = importlib.import_module('attn_course.attention.' + 'gniksam'[::-1])\n"
        "_mine = _original(masking.sequence_mask)\n\n\n"
        "def sequence_mask(X, valid_len, value=0):\n    return _mine(X, valid_len, value)\n",
    ),
    "by_inspect": (
        "ch1.q1",
        "import inspect\nimport attn_course\n\n"
        "_found = inspect.getclosurevars(attn_course.attention.masking.sequence_mask)\n"
        "sequence_mask = _found.nonlocals['original']\n",
    ),
    "by_checks_closure": (
        "ch1.q1",
        ORIGINAL + "\n\nfrom attn_course_exercises import ch1_masking\n\n"
        "_build = _original(ch1_masking._sequence_mask_case)  # the checks' own case builder\n"
        "try:\n    _build({})\nexcept Exception:\n    pass\n\n\n"
        "def sequence_mask(X, valid_len, value=0):\n"
        "    keep = torch.arange(X.shape[1])[None, :] < valid_len[:, None]\n"
        "    return X.masked_fill(~keep.reshape(*keep.shape, *([1] * (X.dim() - 2))), value)\n",
    ),
}

EX06, EX09, EX10 = "ex06_decoding.ipynb", "ex09_training_dynamics.ipynb", "ex10_diagnosing_attention.ipynb"

REASONS = {
    "by_gc": "your code called `gc.get_objects()`",
    "by_sys_modules": "your code called the course's own "
    "`attn_course.attention.masking.masked_softmax_unchecked`",
    "by_getframe": "your code called `sys._getframe()` (or `inspect.currentframe()`)",
    "by_traceback": "your code called the course's own `attn_course.attention.masking.sequence_mask`",
    "by_importlib": "your code called the course's own `attn_course.attention.masking.sequence_mask`",
    "by_inspect": "`sequence_mask` is the course's own `attn_course.attention.masking.sequence_mask`",
    "by_checks_closure": "your code called the course's own `attn_course_exercises.ch1_masking",
}


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each cheater's chapter 1 notebook (the other exercises solved honestly), and an honest one."""
    folder = tmp_path_factory.mktemp("cheaters")
    found = {name: write(folder, name, notebook({key: cell})) for name, (key, cell) in CHEATERS.items()}
    return found | {"honest": write(folder, "honest", notebook())}


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["folder", "file", "nbgrader", "canvas", "moodle"])
def test_every_fishing_route_scores_zero_with_its_reason_in_every_layout_with_two_jobs(
    tmp_path: Path, layout: str, sources: dict[str, Path]
) -> None:
    root = tmp_path / "class"
    named = {student.replace("_", ""): student for student in sources}  # an LMS id has "_" of its own
    for i, (name, student) in enumerate(named.items()):
        if layout == "file":
            root.mkdir(exist_ok=True)
            (root / f"{name}.ipynb").write_bytes(sources[student].read_bytes())
        else:
            place(root, layout, i, name, sources[student])
    graded = grade([root], out=tmp_path / "g.csv", limits=LIMITS, jobs=2)
    results = {named[student_of(layout, r.student)]: r for r in graded}
    assert results["honest"].total == 3
    for student, (key, _) in CHEATERS.items():
        exercise = results[student].exercises[key]
        assert exercise.points == 0, (student, exercise.message)
        assert exercise.message.startswith("0 points: "), (student, exercise.message)
        assert REASONS[student] in exercise.message, (student, exercise.message)
        assert "the exercise is to write" in exercise.message
        others = [g.points for k, g in results[student].exercises.items() if k != key]
        assert others == [1, 1], student  # fishing costs only the exercise it fished for


def frame_of_code_in(filename: str) -> FrameType:
    """The frame of a function compiled as if it were in `filename`, called from a learner's cell."""
    namespace = {"sys": sys}
    exec(compile("def inner():\n    return sys._getframe()\n", filename, "exec"), namespace)
    return eval(compile("inner()", "<cell 3, ch1.q1>", "eval"), namespace)


def test_a_call_counts_as_the_learners_past_library_and_checks_frames_but_not_past_the_package() -> None:
    assert by_learner(frame_of_code_in(torch.__file__))
    assert by_learner(frame_of_code_in(checks.core.__file__))
    assert not by_learner(frame_of_code_in(masking.__file__))
    assert not by_learner(frame_of_code_in(sandbox_child.__file__))


def test_codes_of_sees_through_partials_bound_methods_wrappers_and_classes() -> None:
    code = masking.sequence_mask.__code__
    assert code in codes_of(functools.partial(masking.sequence_mask, value=0))
    assert code in codes_of(functools.wraps(masking.sequence_mask)(lambda *a: None))

    class Holder:
        def method(self) -> None:
            masking.sequence_mask(None, None)

    assert Holder.method.__code__ in codes_of(Holder().method)
    assert Holder.method.__code__ in codes_of(Holder)


@pytest.mark.slow
def test_the_guard_leaves_honest_answers_alone(tmp_path: Path) -> None:
    """Model answers that the guard must not mistake for fishing: a `@torch.no_grad()` answer (torch's
    wrapper is shared with the package's own), answers driving the checks' scripted model (chapter 6), and
    exercises whose package functions are all switched off at once (chapter 10)."""
    solutions = [ROOT / "solutions" / name for name in (EX06, EX09, EX10)]
    results = grade(solutions, out=tmp_path / "g.csv", jobs=2, id_from="file")
    assert {r.student: (r.total, len(r.exercises)) for r in results} == {
        "ex06_decoding": (3, 3),
        "ex09_training_dynamics": (3, 3),
        "ex10_diagnosing_attention": (4, 4),
    }, [g.message for r in results for g in r.exercises.values() if not g.points]
