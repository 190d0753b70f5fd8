"""Submissions for the grading tests: chapter 1's notebook solved, unsolved or altered, a batch of honest and
hostile submissions, a student's file placed in each LMS layout, and answers for the similarity report.
Shared by the test files of this folder."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import attn_course_exercises as checks
from attn_course_tools.grading import Limits

ROOT = Path(__file__).resolve().parents[3]
SOLVED = ROOT / "solutions" / "ex01_masked_softmax.ipynb"
UNSOLVED = ROOT / "exercises" / "ex01_masked_softmax.ipynb"
LIMITS = Limits(cell_timeout=3.0, total_timeout=40.0, memory_mb=5000, max_output_kb=256)
Q1, Q2, Q3 = checks.chapter(1)

WRONG_Q1 = """
def sequence_mask(X, valid_len, value=0):
    keep = torch.arange(X.shape[1])[None, :] < valid_len[:, None]
    return X.masked_fill(keep.reshape(*keep.shape, *([1] * (X.dim() - 2))), value)   # inverted mask
"""

TAMPERING = """
import torch
import attn_course_exercises as c
from attn_course_tools import grading

c.Exercise.judge = lambda self, cases, attempts: c.CheckResult(self.key, self.name, "passed", "Correct")
c.compare = c.core.compare = lambda *args, **kwargs: None  # core: where the judge calls it
grading.ExerciseGrade.__init__ = lambda self, *args, **kwargs: None
torch.allclose = lambda *args, **kwargs: True
torch.equal = lambda *args, **kwargs: True
torch.isclose = lambda a, b, *args, **kwargs: torch.ones_like(a, dtype=torch.bool)
"""
EX01 = "ex01_masked_softmax.ipynb"

ANSWER = '''
def sequence_mask(X, valid_len, value=0):
    """Blank the padding."""
    keep = torch.arange(X.shape[1])[None, :] < valid_len[:, None]   # (batch, maxlen)
    keep = keep.reshape(*keep.shape, *([1] * (X.dim() - 2)))
    filled = torch.full_like(X, value)
    return torch.where(keep, X, filled)
'''

#: ANSWER with its names changed, its lines rewrapped, its comments and docstring rewritten.
DISGUISED = """
def sequence_mask(inputs, lengths, value=0):
    # my own work!
    is_real = torch.arange(inputs.shape[1])[
        None, :] < lengths[:, None]
    is_real = is_real.reshape(*is_real.shape,
                              *([1] * (inputs.dim() - 2)))  # broadcast
    fill = torch.full_like(inputs, value)
    return torch.where(is_real, inputs, fill)
"""

#: The package's own sequence_mask body, its argument checks dropped, renamed and recommented.
PASTED = """
def sequence_mask(X, valid_len, value=0):
    # worked this out from the lecture
    pos = torch.arange(X.shape[1], device=X.device)
    pad = pos >= valid_len.to(X.device)[:, None]
    pad = pad.view(*pad.shape, *([1] * (X.dim() - 2)))
    return X.masked_fill(pad, value)
"""


def notebook(
    cells: dict[str, str] | None = None,
    *,
    solved: bool = True,
    drop_checks: bool = False,
    strip_markers: bool = False,
) -> dict:
    """The chapter 1 notebook (solved or not), with exercise cells replaced (marker kept) or altered."""
    nb = json.loads((SOLVED if solved else UNSOLVED).read_text())
    kept = []
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and source.startswith("# EXERCISE "):
            key = source.splitlines()[0].split()[-1]
            if cells and key in cells:
                source = f"# EXERCISE {key}\n{cells[key]}"
            if strip_markers:
                source = source.split("\n", 1)[1]
        elif drop_checks and cell["cell_type"] == "code" and ".check()" in source:
            source = 'print("Correct! (says the learner)")' if "q1" in source else None
        if source is not None:
            cell["source"] = source
            kept.append(cell)
    nb["cells"] = kept
    return nb


def write(folder: Path, name: str, content: dict | str) -> Path:
    path = folder / f"{name}.ipynb"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def hostile_batch(folder: Path) -> list[Path]:
    sol1, sol2 = Q1.solution_code, Q2.solution_code
    kill_self = sol2.replace(
        '    """\n', '    """\n    import os, signal\n    os.kill(os.getpid(), signal.SIGKILL)\n', 1
    )
    submissions = {
        "kill_parent": notebook(
            {"ch1.q1": sol1 + "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n"}
        ),
        "alice": notebook(),
        "bob": notebook(solved=False),
        "hang": notebook({"ch1.q1": sol1 + "while True:\n    pass\n"}),
        "deaf_hang": notebook(
            {
                "ch1.q1": "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
                + sol1
                + "while True:\n    pass\n"
            }
        ),
        "exits": notebook({"ch1.q1": sol1 + "import os\nos._exit(3)\n"}),
        "sigkill": notebook({"ch1.q2": kill_self}),
        "crash": notebook({"ch1.q1": "1 / 0\n" + sol1}),
        "tamper": notebook({"ch1.q1": WRONG_Q1 + TAMPERING}, drop_checks=True),
        "loud": notebook({"ch1.q1": sol1 + 'print("x" * 5_000_000)\n'}),
        "hog": notebook({"ch1.q1": "import torch\nhog = torch.empty(2**31, dtype=torch.float32)\n" + sol1}),
        "copies": notebook({"ch1.q2": "from attn_course.attention.masking import masked_softmax\n"}),
        "wraps": notebook(
            {
                "ch1.q1": "import attn_course\n\n\ndef sequence_mask(X, valid_len, value=0):\n"
                "    return attn_course.sequence_mask(X, valid_len, value)\n"
            }
        ),
        "unmarked": notebook(strip_markers=True),
        "malformed": '{"cells": [{"cell_type": "code", "source": "def sequence_mask(',
    }
    return [write(folder, name, content) for name, content in submissions.items()]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def defined(source: str) -> object:
    namespace: dict = {}
    exec(checks.PREAMBLES[1], namespace)
    exec(source, namespace)
    return namespace["masked_softmax"]


def place(root: Path, layout: str, number: int, student: str, source: Path) -> Path:
    """Put one student's ex01 where `layout` keeps it; the id the layout gives is checked by the caller."""
    where = {
        "folder": root / student / EX01,
        "nbgrader": root / "submitted" / student / "ps1" / EX01,
        "canvas": root / f"{student}_{1000 + number}_{5000 + number}_{EX01}",
        "moodle": root / f"{student}_{2000 + number}_assignsubmission_file_" / EX01,
    }[layout]
    where.parent.mkdir(parents=True, exist_ok=True)
    where.write_bytes(source.read_bytes())
    return where


def student_of(layout: str, student_id: str) -> str:
    return student_id.rsplit("_", 1)[0] if layout in ("canvas", "moodle") else student_id
