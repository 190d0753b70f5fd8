"""Exercise checks: `q1.check()`, `q1.hint()` and `q1.solution()` for the notebooks in exercises/.

An exercise asks the learner to write a function (or a class) that the package already has. Its check
runs the learner's code and the package's reference on the same seeded inputs -- several shapes, masks
and dtypes, with edge cases such as a valid length of 0 or a sequence of length 1 -- and, where they
disagree, compares the learner's answer with the outputs of known mistakes to name the likely one ("softmax
over the wrong axis", "s_t where s_{t-1} is needed", ...): each mistake is written once, beside its exercise,
as the wrong code a learner writes (`Mistake(hint, wrong=softmax_wrong_axis)`). A check never raises: an
exception in the learner's code is summarised (type, message, the learner's own line), and an untouched
stub (whose body is ``raise NotImplementedError``) answers "not attempted yet".

    import attn_course_exercises as checks
    q1, q2, q3 = checks.chapter(1)
    q1.check()        # finds `sequence_mask` in the notebook, shows the verdict, returns a CheckResult
    q1.hint()
    q1.solution()

A check has three parts, so that a grader can keep the learner's code away from the judge:

1. `Exercise.cases()` builds the inputs (deterministic, from seeded specs; instructors may add hidden ones);
2. `Exercise.attempt(answer, case)` runs the learner's code on one case and returns plain data only
   (tensors, numbers, strings): the output, the tensor inputs as they were afterwards (to catch in-place
   mutation), or a summary of the exception -- the only part that runs learner code;
3. `Exercise.judge(cases, attempts)` compares the attempts with the reference and with the known mistakes'
   outputs (the checks' own wrong code, run here: never the learner's).

In a notebook, `check()` runs all three in the learner's kernel. `attn_course_tools.grading` runs part 2 in a
sandboxed process and parts 1 and 3 in the grader, so nothing the learner's code does can change a grade.
"""

from __future__ import annotations

from attn_course_exercises.ch1_lookup import NADARAYA_WATSON
from attn_course_exercises.ch1_masking import MASKED_SOFTMAX, SEQUENCE_MASK
from attn_course_exercises.ch2_scoring import (
    ADDITIVE_ATTENTION,
    CONCAT_SCORES,
    GENERAL_SCORES,
    MASKED_ATTENTION_BUGS,
    SCALED_DOT_PRODUCT,
)
from attn_course_exercises.ch3_seq2seq import BI_ENCODER, FINAL_STATE, MASKED_CROSS_ENTROPY
from attn_course_exercises.ch4_bahdanau import ALIGNMENT_ERROR_RATE, BAHDANAU_DECODE
from attn_course_exercises.ch5_luong import LOCAL_P_ATTENTION, LOCAL_P_WEIGHTS, LOCATION_WEIGHTS, LUONG_STEP
from attn_course_exercises.ch6_decoding import (  # noqa: F401 - re-exported as checks.ScriptedModel etc.
    BEAM_SEARCH,
    BEAM_STEP,
    GREEDY_DECODE,
    ScriptedDecoder,
    ScriptedModel,
    ScriptedState,
)
from attn_course_exercises.ch9_dynamics import EXPOSURE, HALF_WAY, SEED_NOISE
from attn_course_exercises.ch10_diagnosis import DIAGNOSIS, MEAN_CONCENTRATION, MEAN_ENTROPY, PREDICTIONS
from attn_course_exercises.ch11_self_attention import CAUSAL_MASK, MULTI_HEAD
from attn_course_exercises.ch12_real_sentences import BLEU_STATISTICS, CROSSING_KINDS, CROSSINGS
from attn_course_exercises.core import (  # noqa: F401 - re-exported; the grading sandbox uses resolve and is_learner_frame
    FAILED,
    NOT_ATTEMPTED,
    PASSED,
    Case,
    CheckResult,
    ErrorHint,
    Exercise,
    Mistake,
    is_learner_frame,
    resolve,
    summarize_exception,
)
from attn_course_exercises.outputs import MAX_ELEMENTS, MAX_ITEMS, compare, sanitize  # noqa: F401 - re-exported

# ----------------------------------------------------------------------------------------------------
# Registry

#: Names every exercise cell of a chapter may use: the grader runs exactly this before the learner's cells.
PREAMBLES: dict[int, str] = {
    1: "import math\n\nimport torch\n"
    "from torch.nn import functional as F\n",
    2: "import math\n\nimport torch\nfrom torch import nn\n"
    "from torch.nn import functional as F\n\n"
    "from attn_course.attention.masking import masked_softmax\n",
    3: "import torch\nfrom torch import nn\n"
    "from torch.nn import functional as F\n"
    "from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence\n",
    4: "import math\n\nimport torch\n",
    5: "import math\n\nimport torch\n"
    "from torch.nn import functional as F\n\n"
    "from attn_course.attention.masking import masked_softmax\n",
    6: "import math\n\nimport torch\n"
    "from torch.nn import functional as F\n",
    9: "import math\n\nimport torch\n",
    10: "import math\n\nimport torch\n",
    11: "import math\n\nimport torch\n\n"
    "from attn_course.attention.masking import masked_softmax\n",
    12: "import math\n\nimport torch\n",
}

_CHAPTERS: dict[int, tuple[Exercise, ...]] = {
    1: (SEQUENCE_MASK, MASKED_SOFTMAX, NADARAYA_WATSON),
    2: (SCALED_DOT_PRODUCT, ADDITIVE_ATTENTION, GENERAL_SCORES, CONCAT_SCORES, MASKED_ATTENTION_BUGS),
    3: (MASKED_CROSS_ENTROPY, FINAL_STATE, BI_ENCODER),
    4: (BAHDANAU_DECODE, ALIGNMENT_ERROR_RATE),
    5: (LOCATION_WEIGHTS, LUONG_STEP, LOCAL_P_WEIGHTS, LOCAL_P_ATTENTION),
    6: (GREEDY_DECODE, BEAM_STEP, BEAM_SEARCH),
    9: (EXPOSURE, HALF_WAY, SEED_NOISE),
    10: (MEAN_ENTROPY, MEAN_CONCENTRATION, DIAGNOSIS, PREDICTIONS),
    11: (CAUSAL_MASK, MULTI_HEAD),
    12: (CROSSINGS, CROSSING_KINDS, BLEU_STATISTICS),
}

#: Every exercise by key ("ch1.q2"), in course order.
EXERCISES: dict[str, Exercise] = {ex.key: ex for chapter in _CHAPTERS.values() for ex in chapter}


def chapter(number: int, *, graded: bool = False) -> tuple[Exercise, ...]:
    """The exercises of a chapter, in order: ``q1, q2, q3 = checks.chapter(1)``.

    graded=True (the set-up cell of the notebooks `attn-course release` writes): the same checks and hints,
    but `solution()` says that solutions are off instead of showing the model answer. The switch lives in
    the set-up cell, where the instructor's release writes it, not in global state or the notebook's
    metadata, which a kernel cannot read reliably; the grader never runs the set-up cell, and in its
    sandbox no exercise has a model answer at all (`attn_course_tools.grading.sandbox_child`).
    """
    if number not in _CHAPTERS:
        raise ValueError(f"chapter must be one of {sorted(_CHAPTERS)}, got {number!r}")
    if graded:
        return tuple(exercise.for_graded_work() for exercise in _CHAPTERS[number])
    return _CHAPTERS[number]


def chapters() -> tuple[int, ...]:
    """The chapter numbers that have exercises."""
    return tuple(_CHAPTERS)


__all__ = [
    "EXERCISES",
    "PREAMBLES",
    "Case",
    "CheckResult",
    "ErrorHint",
    "Exercise",
    "Mistake",
    "chapter",
    "chapters",
    "compare",
    "is_learner_frame",
    "resolve",
    "sanitize",
    "summarize_exception",
]
