"""Smoke runs of the benchmarks at tiny sizes: the results have their schema, the reference pipeline computes
the same loss as attn_course, and the bare decoders are the attention decoders minus the attention.

Never asserts on speed: timings on a shared machine say nothing about correctness (a test of the clocks
asserts what each clock counts, around a sleep).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import replace

import pytest
import torch

import attn_course_exercises as checks
from attn_course.training.loop import masked_cross_entropy
from attn_course_tools.grading import Limits
from benchmarks import d2l_style, grading, run, suites
from benchmarks.measure import (
    clock_name,
    interleaved,
    interleaved_slices,
    peak_memory,
    round_ratios,
    sliced_ratio,
    time_once,
    torch_threads,
)

CONFIG = suites.QUICK


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread, as `python -m benchmarks.run` uses: on a busy machine, extra threads only wait."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def corpus():
    return suites.make_corpus(CONFIG)


def _timing_schema(timings, names):
    assert set(timings) == set(names)
    for entry in timings.values():
        assert entry["n"] >= 1 and 0 <= entry["min_s"] <= entry["median_s"] <= entry["max_s"]


def _memory_schema(memory, names):
    assert set(names) <= set(memory)
    for entry in memory.values():
        assert isinstance(entry["method"], str)
        assert entry["peak_bytes"] is None or entry["peak_bytes"] >= 0


def test_d2l_style_twin_computes_the_same_loss_from_the_same_weights(corpus):
    torch.manual_seed(0)
    model = suites.new_model(CONFIG, corpus, "cpu")
    twin = d2l_style.from_attn_course(model)
    items = [corpus.dataset[i] for i in range(6)]
    batch = d2l_style.fixed_length_batch(items, corpus.src_vocab, corpus.tgt_vocab, corpus.num_steps)
    ours = masked_cross_entropy(model(batch.src, batch.src_valid_lens, batch.tgt_in)[0], batch.tgt_out,
                                batch.tgt_valid_lens)
    theirs = twin.loss(twin(batch.src, batch.tgt_in, batch.src_valid_lens), batch.tgt_out)
    assert abs(ours.item() - theirs.item()) < 1e-5


def test_d2l_style_decoder_reprojects_the_keys_at_every_step(corpus):
    model = suites.new_model(CONFIG, corpus, "cpu")
    twin = d2l_style.from_attn_course(model)
    calls = {"d2l": 0, "ours": 0}
    twin.decoder.attention.W_k.register_forward_hook(lambda *_: calls.__setitem__("d2l", calls["d2l"] + 1))
    model.decoder.attention.W_k.register_forward_hook(lambda *_: calls.__setitem__("ours", calls["ours"] + 1))
    batch = d2l_style.fixed_length_batch([corpus.dataset[0]], corpus.src_vocab, corpus.tgt_vocab,
                                         corpus.num_steps)
    twin(batch.src, batch.tgt_in, batch.src_valid_lens)
    model(batch.src, batch.src_valid_lens, batch.tgt_in)
    assert calls == {"d2l": corpus.num_steps, "ours": 1}


def test_fixed_length_batches_pad_every_sentence_to_num_steps(corpus):
    batch = next(iter(d2l_style.fixed_length_loader(corpus.dataset, 4, corpus.num_steps)))
    for field in (batch.src, batch.tgt_in, batch.tgt_out):
        assert field.shape == (4, corpus.num_steps)
    assert torch.equal(batch.tgt_in[:, 1:], batch.tgt_out[:, :-1])
    assert torch.equal(batch.src_valid_lens, (batch.src != corpus.src_vocab.pad).sum(1))


def test_d2l_predict_step_and_predict_seq2seq_agree(corpus):
    model = suites.new_model(CONFIG, corpus, "cpu")
    twin = d2l_style.from_attn_course(model)
    examples = corpus.heldout[:3]
    items = [(i, corpus.src_vocab[e.src], []) for i, e in enumerate(examples)]
    batch = d2l_style.fixed_length_batch(items, corpus.src_vocab, corpus.tgt_vocab, corpus.num_steps)
    preds = d2l_style.predict_step(twin, batch.src, batch.src_valid_lens, corpus.tgt_vocab.bos,
                                   corpus.num_steps)
    assert preds.shape == (3, corpus.num_steps)
    for row, e in zip(preds.tolist(), examples, strict=True):
        one = d2l_style.predict_seq2seq(twin, corpus.src_vocab[e.src], corpus.src_vocab, corpus.tgt_vocab,
                                        corpus.num_steps)
        assert one == d2l_style.cut_at_eos(row, corpus.tgt_vocab.eos)


def test_from_attn_course_refuses_a_luong_model(corpus):
    model = suites.new_model(CONFIG, corpus, "cpu", kind="luong")
    with pytest.raises(ValueError, match="GRU Bahdanau"):
        d2l_style.from_attn_course(model)


@pytest.mark.parametrize("name", list(suites.ATTENTION_DECODERS))
def test_bare_decoder_is_the_attention_decoder_with_a_fixed_context(corpus, name):
    options = dict(suites.ATTENTION_DECODERS[name])
    model = suites.new_model(CONFIG, corpus, "cpu", **options).eval()
    batch = corpus.dataset.collate([corpus.dataset[i] for i in range(3)])
    enc = model.encoder(batch.src, batch.src_valid_lens)
    fixed = suites.fixed_context(enc)

    def fixed_attention(queries, *_):
        batch_size, num_queries = queries.shape[:2]
        weights = fixed.new_zeros(batch_size, num_queries, enc.outputs.shape[1])
        return fixed.expand(-1, num_queries, -1), weights

    if options["kind"] == "bahdanau":
        model.decoder.attention.attend = fixed_attention
        bare = suites.bahdanau_without_attention(model.decoder, batch.tgt_in, enc)
    else:
        model.decoder.align = fixed_attention
        bare = suites.luong_without_attention(model.decoder, batch.tgt_in, enc)
    assert torch.allclose(bare, model.decoder(batch.tgt_in, enc)[0], atol=1e-6)


def test_interleaved_times_every_function_repeats_times_in_alternation():
    order = []
    fns = {"a": lambda: order.append("a") or len(order), "b": lambda: order.append("b") or len(order)}
    samples, outputs = interleaved(fns, repeats=3, warmup=1)
    assert order == ["a", "b", "a", "b", "b", "a", "a", "b"]
    assert [len(v) for v in samples.values()] == [3, 3]
    assert outputs == {"a": 7, "b": 8}                           # each function's last result


def test_interleaved_slices_times_one_part_of_the_slow_pass_between_fast_runs():
    order = []
    whole = {"fast": lambda: order.append("fast") or len(order)}
    sliced = {"slow": lambda k: order.append(f"slow{k}") or f"part {k}"}
    samples, outputs = interleaved_slices(whole, sliced, slices=3)
    assert order == ["fast", "slow0", "slow1", "fast", "fast", "slow2"]
    assert [len(v) for v in samples.values()] == [3, 3]
    assert outputs == {"fast": 5, "slow": ["part 0", "part 1", "part 2"]}     # whole: last; sliced: parts
    samples = {"fast": [1.0, 3.0, 2.0], "slow": [10.0, 12.0, 14.0]}
    assert sliced_ratio(samples, "slow", "fast") == 36.0 / 2.0     # the parts' sum over the fast median
    # Round r alone: 3 parts x part r over fast run r.
    assert round_ratios(samples, "slow", "fast") == [30.0, 12.0, 21.0]
    with pytest.raises(ValueError, match="slices=0"):
        interleaved_slices(whole, sliced, slices=0)


def test_wall_clock_counts_waiting_and_cpu_time_does_not():
    def nap():
        time.sleep(0.05)
    assert time_once(nap, "cpu", wall=True) >= 0.05
    assert time_once(nap, "cpu", wall=False) < 0.04      # asleep, the process uses no CPU
    assert clock_name("cpu", wall=True).startswith("wall-clock")
    assert clock_name("cpu", wall=False).startswith("process CPU time")
    # By default the clock follows torch's threads: CPU time on one, the wall clock on several (CPU time
    # would add up the threads' time).
    assert torch.get_num_threads() == 1                   # the module's fixture
    assert time_once(nap, "cpu") < 0.04 and clock_name("cpu").startswith("process CPU time")
    with torch_threads(2):
        assert time_once(nap, "cpu") >= 0.05 and clock_name("cpu").startswith("wall-clock")


def test_torch_threads_sets_the_count_inside_the_block_and_restores_it():
    before = torch.get_num_threads()
    with pytest.raises(RuntimeError, match="inside"), torch_threads(before + 1):
        assert torch.get_num_threads() == before + 1
        raise RuntimeError("inside")
    assert torch.get_num_threads() == before
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="count must be an int >= 1, got "), torch_threads(bad):
            pass


@pytest.mark.slow
def test_decoding_has_no_all_cores_timings_without_more_threads(corpus):
    config = replace(CONFIG, decode_slices=1)
    model = suites.new_model(config, corpus, "cpu")
    for all_threads in (None, torch.get_num_threads()):
        assert suites.decoding(config, corpus, model, "cpu", all_threads=all_threads)["all_cores"] is None
    rows = {row["claim"]: row for row in run.claims({"decoding": {"all_cores": None}}, torch.device("cpu"))}
    row = rows["greedy batched vs one, all cores"]
    assert row["ratio"] is None and row["met"] is None and row["rounds"] is None
    assert "n/a" in run.format_table([row])


def test_peak_memory_sees_a_large_cpu_tensor():
    result = peak_memory(lambda: torch.ones(8 * 2**20 // 4).sum(), "cpu")   # 8 MiB of float32
    if result["peak_bytes"] is None:
        pytest.skip(result["method"])
    assert result["peak_bytes"] >= 6 * 2**20


@pytest.mark.slow
def test_quick_run_has_every_benchmark_and_claim_and_equal_losses(tmp_path):
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    results = run.run(CONFIG, torch.device("cpu"), log=lambda _: None, all_threads=threads + 1)
    assert torch.get_num_threads() == threads                           # the all-cores timings restore it
    json.loads(json.dumps(results))                                     # JSON-ready
    assert {"machine", "config", "date", "seconds", "benchmarks", "claims"} <= set(results)
    assert results["machine"]["torch"] == torch.__version__
    bench = results["benchmarks"]
    assert set(bench) == {"time_to_quality", "training_throughput", "attention_cost", "luong_parallel",
                          "decoding", "grading"}
    assert bench["grading"]["students"] == CONFIG.grading_students
    assert bench["grading"]["gradebooks_identical"] and bench["grading"]["rerun_gradebook_identical"]

    ttq = bench["time_to_quality"]
    for name in ("attn_course", "d2l_style"):
        entry = ttq[name]
        assert entry["epochs"] == len(entry["curve"]) >= 1
        assert entry["reached"] == (entry["seconds_to_target"] is not None)
        assert 0 <= entry["epoch_facts"]["padding_fraction"] < 1
    # Bucketing wastes less padding and runs fewer decoder steps than padding to num_steps: facts, not times.
    ours, d2l = ttq["attn_course"]["epoch_facts"], ttq["d2l_style"]["epoch_facts"]
    assert ours["padding_fraction"] < d2l["padding_fraction"]
    assert ours["decoder_steps"] < d2l["decoder_steps"]
    assert ours["target_tokens"] == d2l["target_tokens"]
    _memory_schema(ttq["memory"], ["attn_course", "d2l_style"])

    for shape in ("fixed", "bucketed"):
        entry = bench["training_throughput"][shape]
        _timing_schema(entry["timings"], ["attn_course", "d2l_style"])
        assert entry["max_abs_loss_diff_initial"] < 1e-5
        assert entry["max_abs_loss_diff_after_training"] < 1e-5
        assert entry["speedup"] > 0
        _memory_schema(entry["memory"], ["attn_course", "d2l_style"])

    for name in suites.ATTENTION_DECODERS:
        entry = bench["attention_cost"][name]
        _timing_schema(entry["timings"], ["with_attention", "without_attention"]
                       + (["d2l_style_with_attention"] if name == "bahdanau" else []))
        assert entry["attention_over_floor"] > 0

    parallel = bench["luong_parallel"]
    assert parallel["max_abs_logit_diff"] < 1e-5
    _timing_schema(parallel["timings"], ["step_loop", "parallel"])

    decoding = bench["decoding"]
    assert decoding["sentences"] == CONFIG.decode_sentences
    greedy = decoding["greedy"]
    _timing_schema(greedy["timings"], ["attn_course_batched", "attn_course_one_at_a_time",
                                       "d2l_style_predict_step_batched", "d2l_style_one_at_a_time"])
    for name in ("attn_course_one_at_a_time", "d2l_style_one_at_a_time"):      # timed in parts
        timing = greedy["timings"][name]
        assert timing["n"] == CONFIG.decode_slices and timing["total_s"] >= timing["max_s"]
    assert greedy["speedup_batched_vs_one_at_a_time"] == pytest.approx(
        greedy["timings"]["attn_course_one_at_a_time"]["total_s"]
        / greedy["timings"]["attn_course_batched"]["median_s"])
    # Same weights, same greedy rule: the d2l-style decoder translates like attn_course's.
    assert greedy["same_output_d2l_vs_attn_course"] == 1.0
    assert greedy["same_output_d2l_predict_step_vs_one"] == 1.0
    assert 0 <= greedy["same_output_batched_vs_one"] <= 1
    assert decoding["beam"]["beam_size"] == CONFIG.beam_size
    cores = decoding["all_cores"]
    assert cores["threads"] == threads + 1 and cores["clock"].startswith("wall-clock")
    for search in (greedy, decoding["beam"], cores["greedy"], cores["beam"]):
        rounds = search["rounds_batched_vs_one_at_a_time"]
        assert rounds["n"] == CONFIG.decode_slices
        assert 0 < rounds["min"] <= rounds["median"] <= rounds["max"]
    for search in (cores["greedy"], cores["beam"]):
        _timing_schema(search["timings"], ["attn_course_batched", "attn_course_one_at_a_time"])
        assert search["speedup_batched_vs_one_at_a_time"] == pytest.approx(
            search["timings"]["attn_course_one_at_a_time"]["total_s"]
            / search["timings"]["attn_course_batched"]["median_s"])
        assert 0 <= search["same_output_batched_vs_one"] <= 1

    names = [row["claim"] for row in results["claims"]]
    assert names == [claim[0] for claim in run.CLAIMS]
    for row in results["claims"]:
        assert row["ratio"] is None or (math.isfinite(row["ratio"]) and row["ratio"] > 0)
        assert row["met"] is None or row["met"] == (row["ratio"] >= row["target"])
        assert (row["rounds"] is not None) == (row["claim"] in run.ROUNDS)
    table = run.format_table(results["claims"])
    low, high = next(row["rounds"] for row in results["claims"] if row["claim"] == "greedy batched vs one")
    assert f"{low:.1f}-{high:.1f}" in table and "round_ratios" in table


def test_command_line_writes_the_json_and_prints_the_table(tmp_path, capsys):
    assert run.main(["--quick", "--device", "cpu", "--out", str(tmp_path), "--only", "luong_parallel"]) == 0
    written = json.loads((tmp_path / "bench-cpu-quick.json").read_text())
    assert set(written["benchmarks"]) == {"luong_parallel"}
    out = capsys.readouterr().out
    assert "Luong parallel vs loop" in out and "wrote" in out


def test_budget_strict_fails_when_a_notebook_is_over_its_limit(tmp_path, monkeypatch, capsys):
    from benchmarks import budget

    times = {"fast.ipynb": 10.0, "slow.ipynb": 150.0}
    monkeypatch.setattr(budget, "time_notebook", lambda path: {"notebook": path.name, "passed": True,
                                                               "wall_s": times[path.name], "cpu_s": 1.0})
    paths = [str(tmp_path / name) for name in times]
    out = tmp_path / "budget.json"
    assert budget.main([*paths, "--limit", "120", "--out", str(out)]) == 0       # reports only
    assert budget.main([*paths, "--limit", "120", "--strict"]) == 1
    assert budget.main([paths[0], "--limit", "120", "--strict"]) == 0
    written = json.loads(out.read_text())
    assert [row["within_limit"] for row in written["notebooks"]] == [True, False]
    assert written["total_wall_s"] == 160.0
    assert "slow.ipynb" in capsys.readouterr().out


def test_merge_replaces_only_the_sections_run_again(tmp_path, capsys):
    earlier = {"machine": {"cpu": "earlier"}, "date": "earlier", "claims": [],
               "benchmarks": {"grading": {"speedup": 1.8, "rerun_speedup": 90.0},
                              "luong_parallel": {"speedup": -1.0}}}
    (tmp_path / "bench-cpu-quick.json").write_text(json.dumps(earlier))
    argv = ["--quick", "--device", "cpu", "--out", str(tmp_path), "--only", "luong_parallel", "--merge"]
    assert run.main(argv) == 0
    written = json.loads((tmp_path / "bench-cpu-quick.json").read_text())
    assert written["benchmarks"]["grading"] == earlier["benchmarks"]["grading"]
    assert written["benchmarks"]["luong_parallel"]["speedup"] > 0                  # measured again
    assert written["machine"] == earlier["machine"] and written["date"] == "earlier"
    assert [entry["benchmarks"] for entry in written["merged"]] == [["luong_parallel"]]
    rows = {row["claim"]: row["ratio"] for row in written["claims"]}
    assert rows["grading, cores vs 1 job"] == 1.8 and rows["Luong parallel vs loop"] > 0
    assert "merged: luong_parallel" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        run.main(["--quick", "--merge"])                                           # merge what? --only


def test_grading_class_is_one_folder_per_student_with_the_drawn_mix(tmp_path):
    mix = grading.write_class(tmp_path / "a", students=3, seed=0)
    names = sorted(p.name for p in (grading.ROOT / "solutions").glob("ex[0-9]*.ipynb"))
    assert sum(mix.values()) == 3 * len(names) and set(mix) == set(grading.MIX) | set(grading.HOSTILE)
    assert mix["hangs"] == mix["exits"] == 1                                   # at least one of each
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["student001", "student002", "student003"]
    for student in (tmp_path / "a").iterdir():
        assert sorted(p.name for p in student.iterdir()) == names
    assert grading.write_class(tmp_path / "b", students=3, seed=0) == mix                  # seeded
    for path in (tmp_path / "a").rglob("*.ipynb"):
        assert path.read_bytes() == (tmp_path / "b" / path.relative_to(tmp_path / "a")).read_bytes()


def test_wrong_answer_cells_hold_the_catalogues_mutants_and_fail_their_checks():
    answers = grading.wrong_answers()
    assert set(answers) == set(checks.EXERCISES)                    # every exercise can be answered wrong
    for key, cells in answers.items():
        exercise = checks.EXERCISES[key]
        mistakes = [m for m in exercise.mistakes if hasattr(m.wrong, "__course_source__")]
        edited = {m.wrong.__name__: m.code for m in mistakes}
        for mutant, source in cells:
            assert source.startswith(exercise.marker + "\n")
            namespace: dict = {}
            exec(checks.PREAMBLES[int(key[2 : key.index(".")])], namespace)
            exec(source, namespace)                                  # with only the chapter's imports
            if mutant in edited:  # the model answer edited into the mistake, under the exercise's name
                assert edited[mutant] in source
            else:
                assert namespace[exercise.name].__name__ == mutant
            result = exercise.evaluate(namespace[exercise.name])
            assert result.status == checks.FAILED, (key, mutant, result.message)


@pytest.mark.slow
def test_grading_benchmark_grades_a_tiny_class_alike_with_one_and_two_jobs():
    # A short cell timeout: the class's hanging notebook costs 2 s per run instead of 10.
    report = grading.measure(3, [1, 2], limits=Limits(cell_timeout=2.0), log=lambda _: None)
    n = 3 * len(list((grading.ROOT / "solutions").glob("ex[0-9]*.ipynb")))   # 3 students, every notebook
    json.loads(json.dumps(report))                                                   # JSON-ready
    assert report["submissions"] == n == sum(report["mix"].values())
    assert report["limits"]["cell_timeout"] == 2.0 and report["machine"]["logical_cpus"] >= 1
    assert [r["jobs"] for r in report["runs"]] == [1, 2]
    for r in report["runs"]:
        assert r["submissions"] == n and r["from_cache"] == 0
        assert r["seconds_per_submission"] == pytest.approx(r["seconds"] / n)
    assert report["speedup"] == pytest.approx(report["runs"][0]["seconds"] / report["runs"][1]["seconds"])
    assert report["gradebooks_identical"] is True
    assert report["runs"][0]["points"] == report["runs"][1]["points"] == report["rerun"]["points"]
    rerun = report["rerun"]
    assert rerun["jobs"] == 2 and rerun["from_cache"] == n            # every grade remembered
    assert report["rerun_gradebook_identical"] is True
    assert f"{n} submissions" in grading.summary(report)
