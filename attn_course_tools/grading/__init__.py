"""Grade a class's exercise notebooks safely: ``attn-course grade SUBMISSION... --out grades.csv``.

For each submission, this process (the grader) never runs a line of the learner's code:

1. it reads the notebook as JSON and finds the exercise cells: a cell that starts with the marker
   ``# EXERCISE ch1.q2``, else one whose metadata says ``{"attn_course": {"exercise": "ch1.q2"}}``, else a
   code cell that defines the exercise's function or class at top level;
2. it builds each exercise's cases with its own `attn_course_exercises` (plus the instructor's hidden
   ones) and writes their inputs to a job folder;
3. a fresh Python process -- the sandbox, with a memory cap, a file-size cap, a per-cell and a total
   timeout, inside bubblewrap's jail where it works (`jail`: no network, nothing of the machine but the
   system, Python and the course read-only, no model answer on disk) -- runs the chapter's imports, then
   only the learner's exercise cells, each compiled in its own step, then calls the learner's functions on
   the inputs, and writes back plain data (tensors, numbers, strings) and a journal of its steps;
4. the grader reads that data with ``torch.load(weights_only=True)`` and judges it with its own checks.

So editing or deleting check cells, or monkeypatching ``attn_course_exercises`` or torch inside the notebook,
changes nothing: the checks that judge never share a process with the learner's code. A step that kills the
sandbox (``os._exit``, a signal, a hang past its deadline) costs only its exercise: the grader notes why,
starts a fresh sandbox without that step, and carries on. The submission files are only ever read.

Who a submission belongs to comes from the batch's layout (a folder per student, nbgrader, Canvas or Moodle
downloads, file names) or the notebooks' metadata; two students are never merged into one row (`identity`).

`pipeline` runs a class through the stages, each a module, in the order a submission meets them: `reading`
(collect the files, read each once: 1), `identity` (whose it is), `roster` (who should have sent
something), `cache` (grades remembered from earlier runs, keyed by `closure`'s digest of what grading
imports), `batch` (several submissions at once), `judging` (2 and 4), `sandbox` (3, the grader's side),
`sandbox_child` (3, inside the sandbox), `guard` (3, keeps the learner's code from the course's own
answers), `jail` (3, the operating-system jail), `rules` (weights, late penalties, extensions, overrides),
then the writers: `gradebook` (the gradebook and the feedback files), `lms` (Canvas's and
Moodle's import formats), `report` (the class report: attempts, solutions and named mistakes, with
`sections`, where each point is taught) and `similarity` (answers that look copied). `records` holds the
values they hand each other. `gradescope` grades one student at a time the same way, in Gradescope's
container, and builds the autograder zip that does it; `release` writes the notebooks for graded work.
"""

from attn_course_tools.grading.batch import Task, grade_many
from attn_course_tools.grading.cache import GradeCache
from attn_course_tools.grading.gradebook import (
    FORMATS,
    GradebookError,
    Marking,
    gradebook_rows,
    write_feedback,
    write_gradebook,
)
from attn_course_tools.grading.identity import Identities, IdentityError, identify
from attn_course_tools.grading.jail import JailError, JailStatus
from attn_course_tools.grading.judging import check_hidden, grade_submission, judge_submission
from attn_course_tools.grading.pipeline import grade
from attn_course_tools.grading.reading import Submission, collect, read_submission
from attn_course_tools.grading.records import ExerciseGrade, Limits, Row, Step, SubmissionGrade
from attn_course_tools.grading.roster import Roster, RosterError
from attn_course_tools.grading.rules import Override, Rules
from attn_course_tools.grading.sandbox import Sandboxes

__all__ = [
    "FORMATS",
    "ExerciseGrade",
    "GradeCache",
    "GradebookError",
    "Identities",
    "IdentityError",
    "JailError",
    "JailStatus",
    "Limits",
    "Marking",
    "Override",
    "Roster",
    "RosterError",
    "Row",
    "Rules",
    "Sandboxes",
    "Step",
    "Submission",
    "SubmissionGrade",
    "Task",
    "check_hidden",
    "collect",
    "grade",
    "grade_many",
    "gradebook_rows",
    "grade_submission",
    "identify",
    "judge_submission",
    "read_submission",
    "write_feedback",
    "write_gradebook",
]
