"""Chapter 10's models and its seed study: does dropout on the attention weights sharpen them, and how far
apart do tanh and ReLU scores end up? Every comparison is paired: same seed, data and training, one change.

    data = diagnosis_study.chapter_data()                 # 3000 English-French pairs of 3-10 words
    model = diagnosis_study.build(data, seed=0, attention_dropout=0.3)
    history = diagnosis_study.fit(model, data, seed=0)    # TRAINING: 6 epochs of Adam at 0.01, batches of 64
    row = diagnosis_study.measure(model, data)            # entropy, concentration, BLEU, AER, score range

`python -m attn_course_tools.studies diagnosis --out attn_course/course/results/diagnosis_seeds.json` trains,
for seeds 0-4, the tanh model with each attention dropout of `DROPOUTS` and the ReLU model without, and
writes one row per model. The chapter asks the rows its QUESTIONS: each change against the plain model of
the same seed (`paired`), read with chapter 9's test (`compare`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from attn_course.course import RESULTS, chapters
from attn_course.course.chapters import DataConfig
from attn_course.data.tasks import Batch, Example, TaskData, make_batch
from attn_course.measure import significance
from attn_course.measure.diagnostics import attention_concentration, diagnose, score_range
from attn_course.measure.metrics import attention_to_links, corpus_alignment_error_rate, corpus_bleu
from attn_course.models.decoders import BahdanauDecoder
from attn_course.models.decoding import translate
from attn_course.models.encoders import Encoder
from attn_course.models.seq2seq import Seq2Seq
from attn_course.training.loop import History, TrainConfig
from attn_course.training.runtime import seed_everything

#: The chapter's model: 32-dimensional embeddings, a bidirectional encoder of 32 units per direction, a
#: 64-unit Bahdanau decoder.
SIZES = {"embed_size": 32, "encoder_hiddens": 32, "decoder_hiddens": 64}
#: The chapter's training: 6 epochs of batches of 64, Adam at a constant 0.01, gradients clipped at norm 1.
TRAINING = TrainConfig(epochs=6, batch_size=64, lr=1e-2)
#: The chapter's corpus: 3000 English-French pairs of 3 to 10 words, split 80/10/10.
TASK = DataConfig("translation", num_pairs=3000, min_len=3, max_len=10, seed=0)
#: The attention dropout probabilities the study compares with none (0).
DROPOUTS = (0.0, 0.1, 0.3, 0.5)
SEEDS = (0, 1, 2, 3, 4)
#: Where `python -m attn_course_tools.studies diagnosis` wrote the study the chapter reads.
RESULTS_FILE = RESULTS / "diagnosis_seeds.json"
#: French words a model can place without reading their own English partner: the articles, whose form the
#: noun decides (le, la, les, l'), and the subject pronouns.
FUNCTION_WORDS = frozenset({"le", "la", "les", "l'", "un", "une", "des", "il", "elle", "ils", "elles", "je",
                            "j'", "nous", "vous", "tu"})
#: What the chapter compares between a changed model and the plain one (tanh, no attention dropout).
MEASURES = {"bleu": "BLEU", "entropy": "normalised entropy", "score_range_mean": "score range"}
#: The chapter's questions of the study, (score_activation, attention_dropout, measure): the ReLU score
#: (section 6) and each attention dropout (section 8) against the plain model, on each of MEASURES.
QUESTIONS: tuple[tuple[str, float, str], ...] = tuple(
    (activation, dropout, measure)
    for activation, dropout in [("relu", 0.0)] + [("tanh", p) for p in DROPOUTS if p > 0]
    for measure in MEASURES
)


def chapter_data() -> TaskData:
    """The splits and vocabularies of `TASK`."""
    return chapters.task_data(TASK)


def build(data: TaskData, seed: int, *, score_activation: str = "tanh", attention_dropout: float = 0.0
          ) -> Seq2Seq:
    """A fresh, seeded Bahdanau model of `SIZES`; the same weights as `build_model("bahdanau", ...)`."""
    seed_everything(seed)
    encoder = Encoder(len(data.src_vocab), SIZES["embed_size"], SIZES["encoder_hiddens"], bidirectional=True,
                      decoder_hiddens=SIZES["decoder_hiddens"])
    decoder = BahdanauDecoder(len(data.tgt_vocab), SIZES["embed_size"], SIZES["decoder_hiddens"],
                              enc_size=encoder.enc_size, score_activation=score_activation,
                              attention_dropout=attention_dropout)
    return Seq2Seq(encoder, decoder)


def fit(model: Seq2Seq, data: TaskData, seed: int, *, callback=None, device: torch.device | str = "cpu"
        ) -> History:
    """Train `model` with TRAINING on the training split, shuffled with `seed` (which also seeds dropout,
    whatever built the model), through `chapters.fit` without validation; `callback` as in `train`."""
    return chapters.fit(model, data, TRAINING, seed=seed, validate=False, device=device, callback=callback)


def forced_attention(model: Seq2Seq, probe: Batch) -> torch.Tensor:
    """Attention (batch_size, T, S) of `probe` with its references fed to the decoder, in eval mode."""
    with torch.no_grad():
        return model.eval()(probe.src, probe.src_valid_lens, probe.tgt_in)[1]


def bleu_and_aer(model: Seq2Seq, data: TaskData, probe: Batch) -> tuple[float, float]:
    """Corpus BLEU of greedy translations of the test split, and the AER of its forced attention
    (`probe` is the test split as one batch), each step credited to the word it predicts."""
    test = data.test
    hypotheses = [t.target for t in translate(model, [e.src for e in test], data.src_vocab, data.tgt_vocab)]
    bleu = corpus_bleu([h or ["<empty>"] for h in hypotheses], [e.tgt for e in test])
    attention = forced_attention(model, probe).cpu()
    links = [attention_to_links(attention[i, : len(e.tgt) + 1, : len(e.src) + 1], convention="output",
                                src_len=len(e.src), tgt_len=len(e.tgt)) for i, e in enumerate(test)]
    return bleu, corpus_alignment_error_rate(links, [e.sure for e in test], [e.possible for e in test])


def argmax_hits(attention: torch.Tensor, examples: Sequence[Example]) -> dict[str, float]:
    """Where the most-attended source word of each real target word lies, by kind of word.

    attention: (num_examples, T, S) forced attention of `examples` (row t predicts target word t).
    Returns, for content words, `FUNCTION_WORDS` and the full stop, the share whose most-attended source
    position is a sure gold partner ("content_on_gold", "function_on_gold", "stop_on_gold"), and the share of
    function words whose most-attended position is the word right after their gold partner
    ("function_on_next": the noun after an article, the verb after a pronoun).
    """
    kinds = {"content": [0, 0, 0], "function": [0, 0, 0], "stop": [0, 0, 0]}   # words, on gold, on next
    for i, example in enumerate(examples):
        most = attention[i, : len(example.tgt), : len(example.src) + 1].argmax(-1).tolist()
        for t, (word, j) in enumerate(zip(example.tgt, most, strict=True)):
            gold = {s for s, target in example.sure if target == t}
            kind = kinds["stop" if word == "." else "function" if word in FUNCTION_WORDS else "content"]
            kind[0] += 1
            kind[1] += j in gold
            kind[2] += bool(gold) and j == max(gold) + 1
    return {"content_on_gold": kinds["content"][1] / kinds["content"][0],
            "function_on_gold": kinds["function"][1] / kinds["function"][0],
            "function_on_next": kinds["function"][2] / kinds["function"][0],
            "stop_on_gold": kinds["stop"][1] / kinds["stop"][0]}


def measure(model: Seq2Seq, data: TaskData) -> dict[str, float]:
    """What the chapter reads of a trained model, on its test split: mean normalised entropy, mean
    concentration, BLEU, AER, the mean and largest score range (max - min score) of a real step, and
    `argmax_hits`."""
    probe = make_batch(data.test, data.src_vocab, data.tgt_vocab).to(next(model.parameters()).device)
    attention = forced_attention(model, probe)
    diagnosis = diagnose(attention, probe.src_valid_lens, probe.tgt_valid_lens)
    real = torch.arange(attention.shape[1], device=attention.device)[None] < probe.tgt_valid_lens[:, None]
    ranges = score_range(attention, probe.src_valid_lens)[real]
    bleu, aer = bleu_and_aer(model, data, probe)
    concentration = attention_concentration(attention, probe.src_valid_lens, probe.tgt_valid_lens)
    return {"entropy": diagnosis.entropy, "concentration": float(concentration.mean()), "bleu": bleu,
            "aer": aer, "score_range_mean": float(ranges.mean()), "score_range_max": float(ranges.max()),
            **argmax_hits(attention.cpu(), data.test)}


def study_row(data: TaskData, seed: int, score_activation: str, attention_dropout: float) -> dict[str, Any]:
    """Train one model of the study and measure it."""
    model = build(data, seed, score_activation=score_activation, attention_dropout=attention_dropout)
    history = fit(model, data, seed)
    w_v_l1 = float(model.decoder.attention.w_v.weight.detach().abs().sum())   # tanh caps |e_tj| at it
    return {"seed": seed, "score_activation": score_activation, "attention_dropout": attention_dropout,
            "final_train_loss": history.train_loss[-1], "w_v_l1": w_v_l1, **measure(model, data)}


def load_results(path: str | Path = RESULTS_FILE) -> dict[tuple[int, str, float], dict[str, Any]]:
    """The study's rows by (seed, score_activation, attention_dropout)."""
    rows = json.loads(Path(path).read_text(encoding="utf-8"))["rows"]
    return {(row["seed"], row["score_activation"], row["attention_dropout"]): row for row in rows}


def paired(rows: dict[tuple[int, str, float], dict[str, Any]], measure: str, score_activation: str,
           attention_dropout: float) -> list[float]:
    """Seed by seed, in seed order: `measure` of the model (score_activation, attention_dropout) minus that
    of the plain model (tanh, no attention dropout) of the same seed; `rows` as `load_results` gives them."""
    seeds = sorted({seed for seed, _, _ in rows})
    missing = [seed for seed in seeds if (seed, score_activation, attention_dropout) not in rows
               or (seed, "tanh", 0.0) not in rows]
    if missing:
        raise ValueError(f"rows hold no pair ({score_activation!r}, {attention_dropout}) and ('tanh', 0.0) "
                         f"for seeds {missing}; expected one for every seed of {seeds}")
    return [rows[seed, score_activation, attention_dropout][measure] - rows[seed, "tanh", 0.0][measure]
            for seed in seeds]


def compare(rows: dict[tuple[int, str, float], dict[str, Any]], measure: str, score_activation: str,
            attention_dropout: float, questions: int = len(QUESTIONS)) -> significance.Comparison:
    """`paired` read as one of `questions` the chapter asks of its study (`significance.compare`)."""
    differences = paired(rows, measure, score_activation, attention_dropout)
    return significance.compare(differences, questions=questions)
