"""The benchmarks: each function measures one claim and returns plain-Python results (JSON-ready).

All of them compare configurations on the same data and the same initial weights, timed in alternation
(`measure.interleaved`), and attach the peak memory of each configuration (`measure.peak_memory`).

- `time_to_quality`: training seconds until corpus BLEU reaches the target on held-out sentences,
  attn_course's pipeline vs the d2l-style one (benchmarks.d2l_style), trained epoch by epoch in alternation.
- `training_throughput`: target tokens per second of training steps at identical shapes, same weights;
  the losses of both are compared step by step.
- `attention_cost`: each attention decoder vs the same decoder with attention removed, run the same way.
- `luong_parallel`: Luong global attention without input feeding, parallel path vs step loop.
- `decoding`: batched greedy and beam search vs one sentence at a time (and d2l's prediction).
- `compile_cost`: torch.compile on the training step: the compile time, then compiled vs eager.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from attn_course.data.tasks import (
    Batch,
    Example,
    TranslationDataset,
    Vocab,
    bucketed_loader,
    build_vocabs,
    padding_waste,
    split,
    toy_translation,
)
from attn_course.measure.metrics import corpus_bleu
from attn_course.models.decoders import BahdanauDecoder, Decoder, LuongDecoder
from attn_course.models.decoding import translate
from attn_course.models.encoders import EncoderOutput
from attn_course.models.seq2seq import Seq2Seq, build_model
from attn_course.training.loop import TrainConfig, masked_cross_entropy, train
from benchmarks import d2l_style
from benchmarks.measure import (
    Timed,
    clock_name,
    interleaved,
    interleaved_slices,
    peak_memory,
    ratio,
    round_ratios,
    sliced_ratio,
    summary,
    synchronize,
    time_once,
    timed_call,
    torch_threads,
)


@dataclass(frozen=True)
class Config:
    """Sizes of one benchmark run. `FULL` is what `make bench` runs; `QUICK` is a smoke run of seconds."""

    seed: int = 0
    min_len: int = 10                # source lengths of every sentence, training and held-out
    max_len: int = 30
    train_pairs: int = 3000
    heldout_pairs: int = 500         # the fixed held-out set scored by BLEU after every epoch
    embed_size: int = 64
    encoder_hiddens: int = 128       # units per encoder direction (the decoder gets as many)
    batch_size: int = 32
    lr: float = 5e-3
    lr_decay: float = 0.8            # time to quality: both learning rates times this after each epoch
    clip: float = 1.0
    target_bleu: float = 90.0
    ttq_cap_s: float = 600.0         # training seconds allowed to each pipeline to reach target_bleu
    ttq_max_epochs: int = 40
    step_batches: int = 4            # batches per timed sample of training throughput
    repeats: int = 7                 # timed samples per configuration (the median is reported)
    attention_repeats: int = 15      # the same for the (shorter) decoder-only timings
    warmup: int = 1
    decode_sentences: int = 1000
    decode_batch_size: int = 250
    beam_sentences: int = 200
    beam_size: int = 5
    decode_slices: int = 10          # parts of a one-at-a-time pass, each timed between two batched runs
    memory_sentences: int = 50       # sentences decoded one at a time when measuring their peak memory
    grading_students: int = 300      # the class graded by benchmarks.grading, 6 notebooks per student


FULL = Config()
QUICK = replace(FULL, min_len=4, max_len=8, train_pairs=32, heldout_pairs=6, embed_size=8, encoder_hiddens=8,
                batch_size=8, ttq_cap_s=1.0, ttq_max_epochs=1, step_batches=2, repeats=2, attention_repeats=2,
                warmup=0,
                decode_sentences=8, decode_batch_size=4, beam_sentences=3, beam_size=2, decode_slices=2,
                memory_sentences=2, grading_students=10)


class Corpus(NamedTuple):
    """The data every benchmark shares."""

    train: list[Example]
    heldout: list[Example]
    src_vocab: Vocab
    tgt_vocab: Vocab
    dataset: TranslationDataset
    num_steps: int                   # d2l's fixed length: the longest sentence + <eos>, so nothing is cut


def make_corpus(config: Config) -> Corpus:
    """Toy sentences of min_len..max_len source tokens, split so no held-out source is in training."""
    total = config.train_pairs + config.heldout_pairs
    examples = toy_translation(total + total // 10, min_len=config.min_len, max_len=config.max_len,
                               seed=config.seed)
    parts = split(examples, (config.train_pairs / total, config.heldout_pairs / total, 0.0), seed=config.seed)
    train_set, heldout = parts.train[:config.train_pairs], parts.val[:config.heldout_pairs]
    src_vocab, tgt_vocab = build_vocabs(train_set)
    num_steps = max(max(len(e.src), len(e.tgt)) for e in train_set + heldout) + 1
    dataset = TranslationDataset(train_set, src_vocab, tgt_vocab)
    return Corpus(train_set, heldout, src_vocab, tgt_vocab, dataset, num_steps)


def new_model(config: Config, corpus: Corpus, device: torch.device | str, **options: Any) -> Seq2Seq:
    """A freshly initialised model (seeded by config.seed) on `device`; options go to build_model."""
    torch.manual_seed(config.seed)
    kind = options.pop("kind", "bahdanau")
    return build_model(kind, len(corpus.src_vocab), len(corpus.tgt_vocab), embed_size=config.embed_size,
                       encoder_hiddens=config.encoder_hiddens, **options).to(device)


def _memory(fns: dict[str, Callable[[], object]], device: torch.device | str) -> dict[str, Any]:
    return {name: peak_memory(fn, device) for name, fn in fns.items()}


def _timings(samples: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    return {name: summary(values) for name, values in samples.items()}


# --------------------------------------------------------------------------------------------- training
def attn_course_step(model: Seq2Seq, batch: Batch, optimizer: torch.optim.Optimizer, clip: float) -> float:
    """One training step exactly as attn_course.training.loop.train takes it; returns the loss."""
    logits, _ = model(batch.src, batch.src_valid_lens, batch.tgt_in)
    loss = masked_cross_entropy(logits, batch.tgt_out, batch.tgt_valid_lens)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), clip)
    optimizer.step()
    return loss.item()


def _bleu_attn_course(model: Seq2Seq, corpus: Corpus) -> float:
    results = translate(model, [e.src for e in corpus.heldout], corpus.src_vocab, corpus.tgt_vocab,
                        batch_size=len(corpus.heldout))
    return corpus_bleu([r.target for r in results], [e.tgt for e in corpus.heldout])


def _bleu_d2l(model: d2l_style.D2LStyleSeq2Seq, corpus: Corpus, device: torch.device | str) -> float:
    items = [(i, corpus.src_vocab[e.src], corpus.tgt_vocab[e.tgt]) for i, e in enumerate(corpus.heldout)]
    tv = corpus.tgt_vocab
    batch = d2l_style.fixed_length_batch(items, corpus.src_vocab, tv, corpus.num_steps).to(device)
    preds = d2l_style.predict_step(model, batch.src, batch.src_valid_lens, tv.bos, corpus.num_steps)
    hyps = [tv.to_tokens(d2l_style.cut_at_eos(row, tv.eos)) for row in preds.tolist()]
    return corpus_bleu(hyps, [e.tgt for e in corpus.heldout])


def _loader_facts(batches: Sequence[Batch]) -> dict[str, Any]:
    """Padding and work of one epoch's batches: decoder steps = sum of tgt_in widths."""
    return {"batches": len(batches), "padding_fraction": padding_waste(batches),
            "decoder_steps": sum(b.tgt_in.shape[1] for b in batches),
            "target_tokens": sum(int(b.tgt_valid_lens.sum()) for b in batches),
            "target_positions": sum(b.tgt_out.numel() for b in batches)}


def time_to_quality(config: Config, corpus: Corpus, device: torch.device | str,
                    log: Callable[[str], object] | None = None) -> tuple[dict, Seq2Seq]:
    """Training seconds until held-out corpus BLEU >= config.target_bleu: attn_course vs d2l-style pipeline.

    Both start from the same weights (d2l_style.from_attn_course), use Adam(lr) with the learning rate
    multiplied by config.lr_decay after every epoch (at a constant rate both plateau near the target,
    which makes the crossing a matter of noise), clip at config.clip and batches of config.batch_size;
    they train one epoch each in alternation, and after each epoch both are scored on the same held-out
    sentences (scoring is not timed). attn_course: length-bucketed batches,
    attn_course.training.loop.train, batched greedy decoding that stops each sentence at <eos>. d2l-style:
    every sentence padded to num_steps, d2l's decoder, loss and fit loop, predict_step (num_steps steps).
    `log` (optional) receives one line per epoch. Returns the results and the attn_course model as trained.
    """
    model = new_model(config, corpus, device)
    twin = d2l_style.from_attn_course(model)
    ours_loader = bucketed_loader(corpus.dataset, config.batch_size, seed=config.seed)
    d2l_loader = d2l_style.fixed_length_loader(corpus.dataset, config.batch_size, corpus.num_steps,
                                               seed=config.seed)
    ours_opt = torch.optim.Adam(model.parameters(), lr=config.lr)
    d2l_opt = torch.optim.Adam(twin.parameters(), lr=config.lr)
    pipelines = {
        "attn_course": _Pipeline(
            lambda: train(model, ours_loader, TrainConfig(epochs=1, lr=config.lr, clip=config.clip),
                          optimizer=ours_opt, device=device, progress=False),
            lambda: _bleu_attn_course(model, corpus), ours_opt),
        "d2l_style": _Pipeline(lambda: d2l_style.fit_epoch(twin, d2l_loader, d2l_opt, config.clip, device),
                               lambda: _bleu_d2l(twin, corpus, device), d2l_opt),
    }
    for epoch in range(config.ttq_max_epochs):
        active = [name for name, p in pipelines.items() if p.running(config.ttq_cap_s)]
        if not active:
            break
        for name in active if epoch % 2 == 0 else active[::-1]:
            pipeline = pipelines[name]
            bleu = pipeline.epoch(config, device)
            if log is not None:
                log(f"  {name}: epoch {pipeline.epochs}, {pipeline.train_s:.1f} s of training, "
                    f"BLEU {bleu:.1f}")
    ours_epoch = [ours_loader.dataset.collate([ours_loader.dataset[i] for i in idx])
                  for idx in ours_loader.batch_sampler]
    d2l_epoch = list(d2l_loader)
    ours = pipelines["attn_course"].results(_loader_facts(ours_epoch))
    d2l = pipelines["d2l_style"].results(_loader_facts(d2l_epoch))
    return {"target_bleu": config.target_bleu, "cap_s": config.ttq_cap_s, "lr": config.lr,
            "lr_decay_per_epoch": config.lr_decay, "heldout_sentences": len(corpus.heldout),
            "train_pairs": len(corpus.train), "num_steps": corpus.num_steps,
            "attn_course": ours, "d2l_style": d2l, **_speedups(ours, d2l),
            "memory": _training_memory(model, ours_epoch, d2l_epoch, config, device)}, model


@dataclass
class _Pipeline:
    """One pipeline racing to the target BLEU: how it trains an epoch and is scored, and how far it got."""

    train_epoch: Callable[[], object]
    score: Callable[[], float]
    optimizer: torch.optim.Optimizer
    train_s: float = 0.0
    eval_s: float = 0.0
    epochs: int = 0
    curve: list[dict[str, float]] = field(default_factory=list)
    seconds_to_target: float | None = None

    def running(self, cap_s: float) -> bool:
        """Not at the target yet, and within its training seconds."""
        return self.seconds_to_target is None and self.train_s < cap_s

    def epoch(self, config: Config, device: torch.device | str) -> float:
        """Train one epoch (timed), decay the learning rate, score (timed apart); return the BLEU."""
        self.train_s += time_once(self.train_epoch, device)
        self.epochs += 1
        for group in self.optimizer.param_groups:
            group["lr"] *= config.lr_decay
        bleu, seconds = timed_call(self.score, device)
        self.eval_s += seconds
        self.curve.append({"epoch": self.epochs, "train_s": round(self.train_s, 3), "bleu": round(bleu, 2)})
        if bleu >= config.target_bleu:
            self.seconds_to_target = self.train_s
        return bleu

    def results(self, epoch_facts: dict[str, Any]) -> dict[str, Any]:
        return {"reached": self.seconds_to_target is not None, "seconds_to_target": self.seconds_to_target,
                "epochs": self.epochs, "train_s": self.train_s, "eval_s": self.eval_s,
                "final_bleu": self.curve[-1]["bleu"] if self.curve else None, "curve": self.curve,
                "epoch_facts": epoch_facts,
                "seconds_per_epoch": self.train_s / self.epochs if self.epochs else None}


def _speedups(ours: dict[str, Any], d2l: dict[str, Any]) -> dict[str, Any]:
    """Time to quality, d2l-style over attn_course, and its first factor, seconds per epoch."""
    # Time to quality = seconds per epoch x epochs: this is the first factor alone, less noisy than the whole.
    epoch_speedup = (d2l["seconds_per_epoch"] / ours["seconds_per_epoch"]
                     if ours["seconds_per_epoch"] and d2l["seconds_per_epoch"] else None)
    speedup, lower_bound = None, False
    if ours["reached"] and d2l["reached"]:
        speedup = d2l["seconds_to_target"] / ours["seconds_to_target"]
    elif ours["reached"]:           # d2l-style not there within its cap: the ratio is at least this
        speedup, lower_bound = d2l["train_s"] / ours["seconds_to_target"], True
    return {"epoch_speedup": epoch_speedup, "speedup": speedup, "speedup_is_lower_bound": lower_bound}


def _training_memory(model: Seq2Seq, ours_epoch: Sequence[Batch], d2l_epoch: Sequence[Batch], config: Config,
                     device: torch.device | str) -> dict[str, Any]:
    """Peak memory of one training step on each pipeline's widest batch (on copies: nothing changes)."""
    longest = max(ours_epoch, key=lambda b: b.tgt_in.numel()).to(device)
    fixed = d2l_epoch[0].to(device)
    probe, probe_twin = _copies(model, device)
    ours_probe_opt = torch.optim.Adam(probe.parameters())
    d2l_probe_opt = torch.optim.Adam(probe_twin.parameters())
    return _memory({
        "attn_course": lambda: attn_course_step(probe, longest, ours_probe_opt, config.clip),
        "d2l_style": lambda: d2l_style.training_step(probe_twin, fixed, d2l_probe_opt, config.clip)}, device)


def _copies(model: Seq2Seq, device: torch.device | str) -> tuple[Seq2Seq, d2l_style.D2LStyleSeq2Seq]:
    probe = Seq2Seq.from_config(model.config).to(device)
    probe.load_state_dict(model.state_dict())
    return probe.train(), d2l_style.from_attn_course(probe.train()).train()


def _bucketed_batches(config: Config, corpus: Corpus, count: int) -> list[Batch]:
    loader = bucketed_loader(corpus.dataset, config.batch_size, seed=config.seed)
    return [batch for batch, _ in zip(loader, range(count), strict=False)]


def training_throughput(config: Config, corpus: Corpus, device: torch.device | str) -> dict[str, Any]:
    """Target tokens per second of training steps, attn_course vs d2l-style, on identical batches.

    Two shapes: "fixed" (d2l's batches, every sentence at num_steps) and "bucketed" (attn_course's
    batches); both models get exactly the same tensors. Equal initial weights; each timed sample is
    config.step_batches full training steps (forward, loss, backward, clipping, Adam). The losses of the
    two models are compared on every step of the last sample (they train in lockstep).
    """
    size, fixed = config.batch_size, []
    for k in range(0, config.step_batches * size, size):
        items = [corpus.dataset[i] for i in range(k, k + size)]
        fixed.append(d2l_style.fixed_length_batch(items, corpus.src_vocab, corpus.tgt_vocab,
                                                  corpus.num_steps))
    shapes = {"fixed": fixed, "bucketed": _bucketed_batches(config, corpus, config.step_batches)}
    results: dict[str, Any] = {}
    for shape, batches in shapes.items():
        batches = [b.to(device) for b in batches]
        model = new_model(config, corpus, device).train()
        twin = d2l_style.from_attn_course(model).train()
        ours_opt = torch.optim.Adam(model.parameters(), lr=config.lr)
        d2l_opt = torch.optim.Adam(twin.parameters(), lr=config.lr)
        with torch.no_grad():
            initial = [abs(float(masked_cross_entropy(model(b.src, b.src_valid_lens, b.tgt_in)[0],
                                                      b.tgt_out, b.tgt_valid_lens))
                           - float(twin.loss(twin(b.src, b.tgt_in, b.src_valid_lens), b.tgt_out)))
                       for b in batches]

        def ours(model=model, batches=batches, opt=ours_opt) -> list[float]:
            return [attn_course_step(model, b, opt, config.clip) for b in batches]

        def d2l(twin=twin, batches=batches, opt=d2l_opt) -> list[float]:
            return [d2l_style.training_step(twin, b, opt, config.clip) for b in batches]

        samples, losses = interleaved({"attn_course": ours, "d2l_style": d2l}, repeats=config.repeats,
                                      warmup=config.warmup, device=device)
        tokens = sum(int(b.tgt_valid_lens.sum()) for b in batches)
        steps = len(samples["attn_course"]) + config.warmup
        results[shape] = {
            "batch_shape_tgt": [list(b.tgt_in.shape) for b in batches],
            "target_tokens_per_sample": tokens,
            "timings": _timings(samples),
            "tokens_per_s": {name: tokens / statistics.median(v) for name, v in samples.items()},
            "speedup": ratio(samples, "d2l_style", "attn_course"),
            "max_abs_loss_diff_initial": max(initial),
            "max_abs_loss_diff_after_training": max(
                abs(a - b) for a, b in zip(losses["attn_course"], losses["d2l_style"], strict=True)),
            "training_steps_before_comparison": steps * len(batches),
            "memory": _memory({"attn_course": ours, "d2l_style": d2l}, device),
        }
    return results


# --------------------------------------------------------------------------------------------- attention
def fixed_context(enc: EncoderOutput) -> Tensor:
    """The attention-free context: the mean of the real annotations, (batch_size, 1, enc_size)."""
    lens = enc.valid_lens.to(enc.outputs.device, enc.outputs.dtype)
    return (enc.outputs.sum(1) / lens[:, None])[:, None]


def bahdanau_without_attention(decoder: BahdanauDecoder, tgt_in: Tensor, enc: EncoderOutput) -> Tensor:
    """BahdanauDecoder.forward with the attention removed: c_t is one fixed context, the loop stays.

    tgt_in (batch_size, T) long -> logits (batch_size, T, vocab_size). The recurrent floor of the decoder.
    """
    context = fixed_context(enc)
    embedded = decoder.dropout(decoder.embedding(tgt_in))
    hidden, outputs = enc.state, []
    for t in range(tgt_in.shape[1]):
        output, hidden = decoder.rnn(torch.cat([embedded[:, t:t + 1], context], -1), hidden)
        outputs.append(output)
    contexts = context.expand(-1, tgt_in.shape[1], -1)
    return decoder.output(decoder.dropout(torch.cat([torch.cat(outputs, 1), contexts, embedded], -1)))


def luong_without_attention(decoder: LuongDecoder, tgt_in: Tensor, enc: EncoderOutput) -> Tensor:
    """LuongDecoder.forward with the attention removed (c_t fixed), run the same way: a step loop with input
    feeding, one whole-sequence RNN call without. tgt_in (batch_size, T) long -> logits (batch_size, T, V)."""
    context = fixed_context(enc)

    def attentional(outputs: Tensor) -> Tensor:
        return torch.tanh(decoder.W_c(torch.cat([context.expand(-1, outputs.shape[1], -1), outputs], -1)))

    if not decoder.input_feeding:
        outputs, _ = decoder.rnn(decoder.dropout(decoder.embedding(tgt_in)), enc.state)
        return decoder.W_s(decoder.dropout(attentional(outputs)))
    hidden, logits = enc.state, []
    feed = enc.outputs.new_zeros(tgt_in.shape[0], decoder.num_hiddens)
    for t in range(tgt_in.shape[1]):
        inputs = torch.cat([decoder.dropout(decoder.embedding(tgt_in[:, t]))[:, None], feed[:, None]], -1)
        outputs, hidden = decoder.rnn(inputs, hidden)
        h_tilde = attentional(outputs)
        logits.append(decoder.W_s(decoder.dropout(h_tilde))[:, 0])
        feed = h_tilde[:, 0]
    return torch.stack(logits, 1)


def _decoder_inputs(model: nn.Module, batch: Batch) -> EncoderOutput:
    """The encoder's output for `batch`, detached into leaves that require grad (as in training, the decoder's
    backward reaches them) so the decoder alone is timed."""
    with torch.no_grad():
        enc = model.encoder(batch.src, batch.src_valid_lens)
    state = enc.state.detach().requires_grad_()
    return EncoderOutput(enc.outputs.detach().requires_grad_(), state, enc.valid_lens)


def _fwd_bwd(forward: Callable[[], Tensor], batch: Batch) -> Callable[[], None]:
    def run() -> None:
        logits = forward()
        logits = logits[0] if isinstance(logits, tuple) else logits
        masked_cross_entropy(logits, batch.tgt_out, batch.tgt_valid_lens).backward()
    return run


ATTENTION_DECODERS: dict[str, dict[str, Any]] = {
    "bahdanau": {"kind": "bahdanau"},
    "luong_general_input_feeding": {"kind": "luong", "score": "general", "input_feeding": True},
    "luong_general_parallel": {"kind": "luong", "score": "general", "input_feeding": False},
    "luong_concat_parallel": {"kind": "luong", "score": "concat", "input_feeding": False},
}


def _typical_batch(config: Config, corpus: Corpus) -> Batch:
    """A batch of config.batch_size training sentences of about the median length, bucketed."""
    order = sorted(range(len(corpus.dataset)), key=lambda i: corpus.dataset.lengths[i])
    start = max(0, len(order) // 2 - config.batch_size // 2)
    return corpus.dataset.collate([corpus.dataset[i] for i in order[start:start + config.batch_size]])


def attention_cost(config: Config, corpus: Corpus, device: torch.device | str) -> dict[str, Any]:
    """Decoder forward + backward with attention / without (same decoder, c_t fixed, run the same way).

    One bucketed batch of about the median length; the encoder output is computed once beforehand. The
    d2l-style Bahdanau decoder is timed against the same floor, for comparison.
    """
    batch = _typical_batch(config, corpus).to(device)
    results: dict[str, Any] = {"batch_shape_src": list(batch.src.shape),
                               "batch_shape_tgt": list(batch.tgt_in.shape)}
    for name, options in ATTENTION_DECODERS.items():
        model = new_model(config, corpus, device, **options).train()
        enc = _decoder_inputs(model, batch)
        bare = bahdanau_without_attention if options["kind"] == "bahdanau" else luong_without_attention
        fns = {"with_attention": _fwd_bwd(lambda m=model, e=enc: m.decoder(batch.tgt_in, e), batch),
               "without_attention": _fwd_bwd(lambda m=model, e=enc, f=bare: f(m.decoder, batch.tgt_in, e),
                                             batch)}
        if name == "bahdanau":
            twin = d2l_style.from_attn_course(model).train()
            state = twin.decoder.init_state((enc.outputs, enc.state), enc.valid_lens)
            fns["d2l_style_with_attention"] = _fwd_bwd(
                lambda t=twin, s=state: t.decoder(batch.tgt_in, s)[0], batch)
        samples, _ = interleaved(fns, repeats=config.attention_repeats, warmup=config.warmup, device=device)
        entry = {"run_as": "step loop" if options["kind"] == "bahdanau" or options.get("input_feeding")
                 else "whole sequence", "timings": _timings(samples),
                 "attention_over_floor": ratio(samples, "with_attention", "without_attention"),
                 "memory": _memory(fns, device)}
        if "d2l_style_with_attention" in samples:
            entry["d2l_style_over_floor"] = ratio(samples, "d2l_style_with_attention", "without_attention")
        results[name] = entry
    return results


def luong_parallel(config: Config, corpus: Corpus, device: torch.device | str) -> dict[str, Any]:
    """Luong global attention ("general") without input feeding: parallel forward vs the step loop.

    Forward + backward of the decoder on one bucketed batch; both give the same logits (checked).
    """
    batch = _typical_batch(config, corpus).to(device)
    model = new_model(config, corpus, device, kind="luong", score="general", input_feeding=False).train()
    enc = _decoder_inputs(model, batch)
    decoder = model.decoder
    fns = {"step_loop": _fwd_bwd(lambda: Decoder.forward(decoder, batch.tgt_in, enc), batch),
           "parallel": _fwd_bwd(lambda: decoder(batch.tgt_in, enc), batch)}
    with torch.no_grad():
        parallel, loop = decoder(batch.tgt_in, enc)[0], Decoder.forward(decoder, batch.tgt_in, enc)[0]
        difference = float((parallel - loop).abs().max())
    samples, _ = interleaved(fns, repeats=config.attention_repeats, warmup=config.warmup, device=device)
    return {"batch_shape_tgt": list(batch.tgt_in.shape), "timings": _timings(samples),
            "speedup": ratio(samples, "step_loop", "parallel"), "max_abs_logit_diff": difference,
            "memory": _memory(fns, device)}


def compile_cost(config: Config, corpus: Corpus, device: torch.device | str) -> dict[str, Any]:
    """torch.compile on attn_course's Bahdanau training step: the compile time, then eager vs compiled.

    One fixed shape (d2l's batches, every sentence at num_steps), so the step compiles once; inductor's
    caches are off, so the compile is measured cold. The first compiled step (which compiles the forward
    and backward graphs) is timed on the wall clock, since compilation also runs in worker processes.
    """
    import torch._inductor.config as inductor_config

    batches = []
    for k in range(0, config.step_batches * config.batch_size, config.batch_size):
        items = [corpus.dataset[i] for i in range(k, k + config.batch_size)]
        batches.append(d2l_style.fixed_length_batch(items, corpus.src_vocab, corpus.tgt_vocab,
                                                    corpus.num_steps).to(device))
    eager = new_model(config, corpus, device).train()
    compiled_model = new_model(config, corpus, device).train()
    compiled = torch.compile(compiled_model)
    eager_opt = torch.optim.Adam(eager.parameters(), lr=config.lr)
    compiled_opt = torch.optim.Adam(compiled_model.parameters(), lr=config.lr)

    def steps(model: nn.Module, optimizer: torch.optim.Optimizer) -> Callable[[], list[float]]:
        return lambda: [attn_course_step(model, b, optimizer, config.clip) for b in batches]

    fns = {"eager": steps(eager, eager_opt), "compiled": steps(compiled, compiled_opt)}
    with inductor_config.patch(force_disable_caches=True):
        synchronize(device)
        start = time.perf_counter()
        attn_course_step(compiled, batches[0], compiled_opt, config.clip)
        synchronize(device)
        compile_wall = time.perf_counter() - start
        attn_course_step(eager, batches[0], eager_opt, config.clip)     # the same first step, eagerly
        samples, losses = interleaved(fns, repeats=config.repeats, warmup=config.warmup, device=device)
    return {"batch_shape_tgt": list(batches[0].tgt_in.shape), "compile_wall_s": compile_wall,
            "timings": _timings(samples), "speedup": ratio(samples, "eager", "compiled"),
            "max_abs_loss_diff": max(abs(a - b) for a, b in zip(losses["eager"], losses["compiled"],
                                                                 strict=True))}


# --------------------------------------------------------------------------------------------- decoding
def decoding_sentences(config: Config, corpus: Corpus, count: int) -> list[list[str]]:
    """`count` toy source sentences of min_len..max_len tokens, none of them a training source."""
    seen = {tuple(e.src) for e in corpus.train}
    fresh, seed = [], config.seed + 1
    while len(fresh) < count:
        batch = toy_translation(2 * count, min_len=config.min_len, max_len=config.max_len, seed=seed)
        fresh += [e.src for e in batch if tuple(e.src) not in seen]
        seed += 1
    random.Random(config.seed).shuffle(fresh)
    return fresh[:count]


def _translations(results: Sequence) -> list[list[str]]:
    return [r.target for r in results]


class _Searches:
    """The decoders the decoding benchmark times, each a method that returns what it decoded.

    attn_course: `translate` (greedy or beam search) on any sentences in batches of any size; each
    may take up to num_steps steps per sentence, d2l's limit. d2l-style: `predict_seq2seq` one sentence at
    a time, and `predict_step` on the benchmark's sentences as one fixed-length batch (num_steps steps).
    """

    def __init__(self, config: Config, corpus: Corpus, model: Seq2Seq, device: torch.device | str,
                 sentences: Sequence[list[str]]):
        self.model = model.to(device).eval()
        self.twin = d2l_style.from_attn_course(self.model).eval()
        self.sv, self.tv, self.num_steps = corpus.src_vocab, corpus.tgt_vocab, corpus.num_steps
        self.beam_size = config.beam_size
        items = [(i, self.sv[s], []) for i, s in enumerate(sentences)]
        self.fixed = d2l_style.fixed_length_batch(items, self.sv, self.tv, self.num_steps).to(device)

    def greedy(self, sentences: Sequence[list[str]], batch_size: int) -> list:
        return translate(self.model, sentences, self.sv, self.tv, beam_size=1, batch_size=batch_size,
                         max_len=self.num_steps)

    def beam(self, sentences: Sequence[list[str]], batch_size: int) -> list:
        return translate(self.model, sentences, self.sv, self.tv, beam_size=self.beam_size,
                         batch_size=batch_size, max_len=self.num_steps)

    def d2l_one_at_a_time(self, sentences: Sequence[list[str]]) -> list[list[int]]:
        return [d2l_style.predict_seq2seq(self.twin, self.sv[s], self.sv, self.tv, self.num_steps)
                for s in sentences]

    def d2l_predict_step(self) -> Tensor:
        """Every benchmark sentence in one batch: (sentences, num_steps) token ids."""
        return d2l_style.predict_step(self.twin, self.fixed.src, self.fixed.src_valid_lens, self.tv.bos,
                                      self.num_steps)


def _in_parts(run: Callable[[Sequence], object], items: Sequence, slices: int) -> Callable[[int], object]:
    """run on part k of the items (items k, k + slices, ...): a sliced function of `interleaved_slices`."""
    return lambda k: run(items[k::slices])


def _joined(parts: Sequence[list]) -> list:
    """The results of `_in_parts`'s parts (part 0 first) back in item order."""
    whole: list = [None] * sum(len(part) for part in parts)
    for k, part in enumerate(parts):
        whole[k::len(parts)] = part
    return whole


def decoding(config: Config, corpus: Corpus, model: Seq2Seq, device: torch.device | str,
             all_threads: int | None = None) -> dict[str, Any]:
    """Batched greedy / beam search vs one sentence at a time, with the same trained model and sentences.

    attn_course: `translate` with batch_size=config.decode_batch_size vs batch_size=1 (the same code; each
    sentence stops at its <eos>); d2l-style: one sentence at a time and `predict_step` (see `_Searches`).
    Beam search runs on the first config.beam_sentences. One sentence at a time is timed in
    config.decode_slices parts (sentences k, k + slices, ...), each between two batched runs
    (`measure.interleaved_slices`): its time is the sum of the parts, the batched time the median of the runs.

    all_threads: on the CPU, when more than the torch threads of the run (the benchmarks use one), the
    attn_course comparisons are timed again with that many threads (torch's default: every core) on the
    wall clock, under "all_cores": a batch's matrix products spread over the cores, one sentence's tiny
    operations do not, and the ratio is what a user of the whole machine sees. Else "all_cores" is None.
    """
    sentences = decoding_sentences(config, corpus, config.decode_sentences)
    beam = sentences[:config.beam_sentences]
    searches = _Searches(config, corpus, model, device, sentences)
    slices = config.decode_slices
    greedy = interleaved_slices(
        {"attn_course_batched": lambda: searches.greedy(sentences, config.decode_batch_size),
         "d2l_style_predict_step_batched": searches.d2l_predict_step},
        {"attn_course_one_at_a_time": _in_parts(lambda part: searches.greedy(part, 1), sentences, slices),
         "d2l_style_one_at_a_time": _in_parts(searches.d2l_one_at_a_time, sentences, slices)},
        slices=slices, device=device)
    beam_result = _search_vs_one(searches.beam, beam, config, device)
    all_cores = None
    more_threads = all_threads is not None and all_threads > torch.get_num_threads()
    if torch.device(device).type == "cpu" and more_threads:
        with torch_threads(all_threads):
            all_cores = {"threads": all_threads, "clock": clock_name(device, wall=True),
                         "greedy": _search_vs_one(searches.greedy, sentences, config, device, wall=True),
                         "beam": _search_vs_one(searches.beam, beam, config, device, wall=True)}
    return {
        "sentences": len(sentences), "batch_size": config.decode_batch_size, "num_steps": corpus.num_steps,
        "slices": slices,
        "greedy": _greedy_comparison(greedy, corpus),
        "beam": {"beam_size": config.beam_size, "sentences": len(beam), **beam_result},
        "all_cores": all_cores,
        "memory": _memory(_decoding_memory_fns(searches, config, sentences, beam), device),
    }


def _search_vs_one(search: Callable[[Sequence, int], list], sentences: Sequence, config: Config,
                   device: torch.device | str, wall: bool | None = None) -> dict[str, Any]:
    """search(sentences, batch_size): batched vs one sentence at a time in parts (`_batched_vs_one`)."""
    slices = config.decode_slices
    timed = interleaved_slices(
        {"attn_course_batched": lambda: search(sentences, config.decode_batch_size)},
        {"attn_course_one_at_a_time": _in_parts(lambda part: search(part, 1), sentences, slices)},
        slices=slices, device=device, wall=wall)
    return _batched_vs_one(timed.samples, _translations(timed.outputs["attn_course_batched"]),
                           _translations(_joined(timed.outputs["attn_course_one_at_a_time"])))


def _greedy_comparison(greedy: Timed, corpus: Corpus) -> dict[str, Any]:
    """Greedy search's ratios and agreements: attn_course batched vs one at a time and vs d2l-style."""
    samples, outputs, tv = greedy.samples, greedy.outputs, corpus.tgt_vocab
    batched = _translations(outputs["attn_course_batched"])
    single = _translations(_joined(outputs["attn_course_one_at_a_time"]))
    d2l_single = [tv.to_tokens(ids) for ids in _joined(outputs["d2l_style_one_at_a_time"])]
    d2l_batch = [tv.to_tokens(d2l_style.cut_at_eos(row, tv.eos))
                 for row in outputs["d2l_style_predict_step_batched"].tolist()]
    return {**_batched_vs_one(samples, batched, single, also_sliced=["d2l_style_one_at_a_time"]),
            "speedup_vs_d2l_one_at_a_time": sliced_ratio(samples, "d2l_style_one_at_a_time",
                                                         "attn_course_batched"),
            "speedup_vs_d2l_predict_step": ratio(samples, "d2l_style_predict_step_batched",
                                                 "attn_course_batched"),
            "decoder_steps": {"attn_course_one_at_a_time": sum(len(t) + 1 for t in single),
                              "d2l_style_predict_step_batched": corpus.num_steps * len(batched)},
            "same_output_d2l_vs_attn_course": _agreement(d2l_single, single),
            "same_output_d2l_predict_step_vs_one": _agreement(d2l_batch, d2l_single)}


def _decoding_memory_fns(searches: _Searches, config: Config, sentences: Sequence,
                         beam: Sequence) -> dict[str, Callable[[], object]]:
    """The searches whose peak memory the decoding benchmark reports (one at a time: a few sentences)."""
    some = sentences[:config.memory_sentences]
    n, batch_size = len(some), config.decode_batch_size
    return {"greedy_attn_course_batched": lambda: searches.greedy(sentences, batch_size),
            f"greedy_attn_course_one_at_a_time_{n}_sentences": lambda: searches.greedy(some, 1),
            "greedy_d2l_style_predict_step_batched": searches.d2l_predict_step,
            f"greedy_d2l_style_one_at_a_time_{n}_sentences": lambda: searches.d2l_one_at_a_time(some),
            "beam_attn_course_batched": lambda: searches.beam(beam, batch_size),
            f"beam_attn_course_one_at_a_time_{n}_sentences": lambda: searches.beam(beam[:n], 1)}


def _batched_vs_one(samples: dict[str, list[float]], batched: Sequence[list[str]],
                    single: Sequence[list[str]], also_sliced: Sequence[str] = ()) -> dict[str, Any]:
    """attn_course batched vs one sentence at a time, timed by `interleaved_slices`: the timings (also_sliced:
    other functions timed in parts), the ratio, its rounds, and the fraction of identical translations."""
    slow, fast = "attn_course_one_at_a_time", "attn_course_batched"
    return {"timings": _sliced_timings(samples, [slow, *also_sliced]),
            "speedup_batched_vs_one_at_a_time": sliced_ratio(samples, slow, fast),
            "rounds_batched_vs_one_at_a_time": _spread(round_ratios(samples, slow, fast)),
            "same_output_batched_vs_one": _agreement(batched, single)}


def _sliced_timings(samples: dict[str, list[float]], sliced: Sequence[str]) -> dict[str, dict[str, float]]:
    """`_timings`, plus total_s for the functions timed in parts: one full pass, the sum of its parts."""
    timings = _timings(samples)
    for name in sliced:
        timings[name]["total_s"] = sum(samples[name])
    return timings


def _spread(ratios: Sequence[float]) -> dict[str, float]:
    """Median, min and max of the ratios measured round by round (`measure.round_ratios`)."""
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios), "n": len(ratios)}


def _agreement(a: Sequence[list[str]], b: Sequence[list[str]]) -> float:
    """Fraction of sentences translated identically."""
    return sum(x == y for x, y in zip(a, b, strict=True)) / len(a)


def config_dict(config: Config) -> dict[str, Any]:
    return asdict(config)
