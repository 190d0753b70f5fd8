"""Shared fixtures: every test starts from the same seed; `device` is CPU, plus CUDA when present. And the
harness the files of learners' answers share, `LearnersAnswers`."""

from __future__ import annotations

import pytest
import torch

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])

# Tests use tiny tensors: on a busy machine, waking a second intra-op thread for each op costs far more
# than it saves (a float64 gradcheck of masked_softmax takes ~2 s with 2 threads, ~0.03 s with 1).
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    torch.manual_seed(0)


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> torch.device:
    return torch.device(request.param)


def _copy_loader(num_pairs: int = 48, batch_size: int = 16, seed: int = 0):
    """(a bucketed loader of `copy_task` pairs of 2-6 symbols out of 8, src_vocab, tgt_vocab)."""
    from attn_course.data import tasks

    examples = tasks.copy_task(num_pairs, min_len=2, max_len=6, vocab_size=8, seed=seed)
    src_vocab, tgt_vocab = tasks.build_vocabs(examples)
    dataset = tasks.TranslationDataset(examples, src_vocab, tgt_vocab)
    return tasks.bucketed_loader(dataset, batch_size, seed=seed), src_vocab, tgt_vocab


def _tiny_seq2seq(src_vocab, tgt_vocab, kind: str = "bahdanau", *, seed: int = 0, **options):
    """A seq2seq model of `kind` with 8-dimensional embeddings and 16 encoder units, built after seeding."""
    from attn_course.models.seq2seq import build_model

    torch.manual_seed(seed)
    return build_model(kind, len(src_vocab), len(tgt_vocab), embed_size=8, encoder_hiddens=16, **options)


@pytest.fixture
def copy_loader():
    """A factory: copy_loader(num_pairs=48, batch_size=16, seed=0) -> (loader, src_vocab, tgt_vocab); a fresh
    loader each call, so its epochs start again."""
    return _copy_loader


@pytest.fixture
def tiny_seq2seq():
    """A factory: tiny_seq2seq(src_vocab, tgt_vocab, kind="bahdanau", seed=0, **options) -> a small model,
    the same weights for the same arguments whatever ran before."""
    return _tiny_seq2seq


class LearnersAnswers:
    """The harness every file of learners' answers shares (tests/learner_answers.py, and chapters 9, 10 and
    12's files): each answer is judged once; a correct alternative must pass, a wrong answer must be rejected
    without a traceback, most rejections must name the mistake (hold one of the answer's phrases), and every
    mistake a check names must be the verdict on some wrong answer.

    answers: (key, label, phrases, source) tuples, phrases None for a correct alternative; define(answer): the
    function or class the answer defines, as the grader defines it. Test modules import it by name.
    """

    def __init__(self, answers, define) -> None:
        self.answers, self.define = list(answers), define
        self.correct = [a for a in self.answers if a.phrases is None]
        self.wrong = [a for a in self.answers if a.phrases is not None]
        self._verdicts: dict = {}

    @staticmethod
    def ids(answers) -> list[str]:
        return [f"{a.key}:{a.label}" for a in answers]

    def result(self, answer):
        """The check's verdict on `answer` (a CheckResult), computed once."""
        import attn_course_exercises as checks

        index = self.answers.index(answer)
        if index not in self._verdicts:
            self._verdicts[index] = checks.EXERCISES[answer.key].evaluate(self.define(answer))
        return self._verdicts[index]

    def names_its_mistake(self, answer) -> bool:
        """Whether the diagnosis (the message before its "Failing case: ..." line, whose inputs could hold one
        of the phrases by chance) contains one of the answer's phrases."""
        diagnosis = self.result(answer).message.split("\nFailing case:")[0].lower()
        return any(phrase.lower() in diagnosis for phrase in answer.phrases or ())

    def assert_passes(self, answer) -> None:
        outcome = self.result(answer)
        assert outcome.passed, outcome.message

    def assert_rejected(self, answer) -> None:
        outcome = self.result(answer)
        assert outcome.status == "failed", f"{answer.label} passes: {outcome.message}"
        assert "Traceback" not in outcome.message

    def assert_package_refused(self, key: str) -> None:
        """The package's own objects that `key` asks the learner to write are refused as answers, by name."""
        import attn_course_exercises as checks

        exercise = checks.EXERCISES[key]
        for dotted in exercise.package:
            outcome = exercise.evaluate(checks.resolve(dotted))
            assert not outcome.passed and "package's own" in outcome.message

    def unnamed(self, key: str) -> list[str]:
        """The wrong answers to `key` whose message does not name their mistake, with the start of it."""
        return [
            f"{a.label}: {self.result(a).message[:200]}"
            for a in self.wrong
            if a.key == key and not self.names_its_mistake(a)
        ]

    def unreached(self, key: str) -> list[str]:
        """The hints of `key`'s named mistakes that are the verdict on none of its wrong answers."""
        import attn_course_exercises as checks

        messages = [self.result(a).message for a in self.wrong if a.key == key]
        return [
            m.hint
            for m in checks.EXERCISES[key].mistakes
            if not any(message.startswith(m.hint + "\n") for message in messages)
        ]
