"""Run the benchmarks: ``python -m benchmarks.run [--quick] [--device cpu|cuda] [--out benchmarks/results/]``.

Prints a table of the claims (each ratio against its target) and writes every measurement, with the
machine it ran on, to OUT/bench-DEVICE.json (bench-DEVICE-quick.json with --quick). Ratios are the
claims; absolute times depend on the machine and its load. See benchmarks/measure.py for the methods,
benchmarks/grading.py for grading a class. ``--only NAME... --merge`` runs some benchmarks again and
replaces only their sections in the existing file.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from attn_course.training.runtime import get_device
from benchmarks import grading, suites
from benchmarks.measure import machine_info

RESULTS = Path(__file__).resolve().parent / "results"

# (name, where the ratio is in the results, target or None, what is compared)
CLAIMS: list[tuple[str, tuple[str, ...], float | None, str]] = [
    ("time to BLEU target", ("time_to_quality", "speedup"), 2.0,
     "d2l-style / attn_course training seconds until held-out corpus BLEU >= target"),
    ("train epoch, pipelines", ("time_to_quality", "epoch_speedup"), None,
     "d2l-style / attn_course training seconds per epoch (the first factor of time to quality)"),
    ("train step, fixed shapes", ("training_throughput", "fixed", "speedup"), 1.3,
     "attn_course / d2l-style target tokens per second, d2l's batches (num_steps)"),
    ("train step, bucketed shapes", ("training_throughput", "bucketed", "speedup"), 1.3,
     "attn_course / d2l-style target tokens per second, attn_course's batches"),
    ("Bahdanau / no attention", ("attention_cost", "bahdanau", "attention_over_floor"), None,
     "decoder fwd+bwd with attention / without (step loop both)"),
    ("d2l Bahdanau / no attention", ("attention_cost", "bahdanau", "d2l_style_over_floor"), None,
     "the textbook decoder against the same floor"),
    ("Luong feeding / no attention",
     ("attention_cost", "luong_general_input_feeding", "attention_over_floor"), None,
     "general score, input feeding (step loop both)"),
    ("Luong parallel / no attention", ("attention_cost", "luong_general_parallel", "attention_over_floor"),
     None, "general score, no feeding (whole sequence both)"),
    ("Luong concat / no attention", ("attention_cost", "luong_concat_parallel", "attention_over_floor"),
     None, "concat score, no feeding (whole sequence both)"),
    ("Luong parallel vs loop", ("luong_parallel", "speedup"), None,
     "step loop / parallel path, fwd+bwd (target >= 5x on a GPU)"),
    ("greedy batched vs one", ("decoding", "greedy", "speedup_batched_vs_one_at_a_time"), 20.0,
     "one sentence at a time / batched, attn_course greedy"),
    ("greedy vs d2l one at a time", ("decoding", "greedy", "speedup_vs_d2l_one_at_a_time"), None,
     "d2l predict_seq2seq per sentence / attn_course batched"),
    ("beam batched vs one", ("decoding", "beam", "speedup_batched_vs_one_at_a_time"), None,
     "one sentence at a time / batched, beam search"),
    ("greedy batched vs one, all cores",
     ("decoding", "all_cores", "greedy", "speedup_batched_vs_one_at_a_time"), 20.0,
     "the same on every core torch uses by default, wall clock (CPU)"),
    ("beam batched vs one, all cores",
     ("decoding", "all_cores", "beam", "speedup_batched_vs_one_at_a_time"), None,
     "the same on every core torch uses by default, wall clock (CPU)"),
    ("torch.compile train step", ("compile", "speedup"), None,
     "eager / compiled training step at one fixed shape, after the compile (compile_wall_s)"),
    # No target: the speed-up is bounded by the cores (grading.cores), which differ between machines.
    ("grading, cores vs 1 job", ("grading", "speedup"), None,
     "seconds to grade a class with --jobs 1 / --jobs <cores>, wall clock (benchmarks/grading.py)"),
    ("grading, re-run from cache", ("grading", "rerun_speedup"), None,
     "seconds of the --jobs <cores> run / the same class again with its grade cache"),
]

BENCHMARKS = ("time_to_quality", "training_throughput", "attention_cost", "luong_parallel", "decoding",
              "compile", "grading")
QUICK_SKIPS = ("compile",)      # tens of seconds of compilation even for a tiny model
CPU_ONLY = ("grading",)         # runs on the CPU whatever the device: measured by a CPU run, not a GPU one

GPU_TARGETS = {"Luong parallel vs loop": 5.0}

# Claims timed in parts between runs of the fast side: where the ratio of each round is (its spread), the
# sibling of the claim's ratio in the results.
ROUNDS = {name: (*path[:-1], "rounds_batched_vs_one_at_a_time") for name, path, _, _ in CLAIMS
          if path[-1] == "speedup_batched_vs_one_at_a_time"}


def _get(results: dict[str, Any], path: Sequence[str]) -> Any:
    for key in path:
        if not isinstance(results, dict) or key not in results:
            return None
        results = results[key]
    return results


def claims(results: dict[str, Any], device: torch.device) -> list[dict[str, Any]]:
    """Each claimed ratio with its target and whether it is met (None where there is no target)."""
    rows = []
    for name, path, target, meaning in CLAIMS:
        if device.type == "cuda" and name in GPU_TARGETS:
            target = GPU_TARGETS[name]
        value = _get(results, path)
        lower_bound = path == ("time_to_quality", "speedup") and bool(
            _get(results, ("time_to_quality", "speedup_is_lower_bound")))
        met = None if target is None or value is None else value >= target
        rounds = _get(results, ROUNDS[name]) if name in ROUNDS else None
        rows.append({"claim": name, "ratio": value, "lower_bound": lower_bound, "target": target, "met": met,
                     "rounds": None if rounds is None else [rounds["min"], rounds["max"]],
                     "meaning": meaning})
    return rows


def format_table(rows: list[dict[str, Any]]) -> str:
    """The claims as a fixed-width text table."""
    lines = [f"{'claim':<32} {'ratio':>9} {'rounds':>11} {'target':>7} {'met':>5}  meaning", "-" * 114]
    for row in rows:
        value = "n/a" if row["ratio"] is None else f"{'>=' if row['lower_bound'] else ''}{row['ratio']:.2f}x"
        rounds = "" if row.get("rounds") is None else "{:.1f}-{:.1f}".format(*row["rounds"])
        target = "" if row["target"] is None else f"{row['target']:.1f}x"
        met = "" if row["met"] is None else ("yes" if row["met"] else "NO")
        lines.append(f"{row['claim']:<32} {value:>9} {rounds:>11} {target:>7} {met:>5}  {row['meaning']}")
    footnote = ("rounds: the lowest and highest ratio of the single rounds of a claim timed in parts "
                "(benchmarks/measure.py, round_ratios)")
    return "\n".join(lines + ([footnote] if any(row.get("rounds") for row in rows) else []))


def _ttq_note(results: dict[str, Any]) -> str:
    ttq = results.get("time_to_quality")
    if not ttq:
        return ""
    parts = []
    for name in ("attn_course", "d2l_style"):
        r = ttq[name]
        if r["reached"]:
            parts.append(f"{name}: BLEU {r['final_bleu']:.1f} after {r['epochs']} epochs, "
                         f"{r['seconds_to_target']:.1f} s of training")
        else:
            parts.append(f"{name}: not reached within {r['train_s']:.0f} s ({r['epochs']} epochs, "
                         f"BLEU {r['final_bleu']})")
    return "time to quality -- " + "; ".join(parts)


def _grading_note(results: dict[str, Any]) -> str:
    report = results.get("grading")
    if not report:
        return ""
    runs = ", ".join(f"{r['seconds_per_submission']:.3f} s with {r['jobs']} job{'s' * (r['jobs'] > 1)}"
                     for r in report["runs"])
    return (f"grading -- {report['submissions']} submissions ({report['students']} students): {runs} per "
            f"submission; gradebooks identical: {report['gradebooks_identical']}; re-run from the cache "
            f"{report['rerun']['seconds']:.1f} s")


def run(config: suites.Config, device: torch.device, only: Sequence[str] | None = None,
        log: Callable[[str], object] = print,
        on_update: Callable[[dict[str, Any]], object] | None = None,
        all_threads: int | None = None) -> dict[str, Any]:
    """Run the benchmarks (those named in `only`, else all; the quick config skips QUICK_SKIPS) and return
    the JSON-ready results. on_update (optional) receives the results so far after each benchmark.
    all_threads: torch's default thread count, for the decoding benchmark's all-cores timings (None: none)."""
    started = time.perf_counter()
    corpus = suites.make_corpus(config)
    results: dict[str, Any] = {}
    skips = (QUICK_SKIPS if config == suites.QUICK else ()) + (CPU_ONLY if device.type == "cuda" else ())
    if only:
        wanted = [name for name in BENCHMARKS if name in only]
    else:
        wanted = [name for name in BENCHMARKS if name not in skips]
    model = None

    def report() -> dict[str, Any]:
        return {"machine": machine_info(device), "config": suites.config_dict(config),
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "decoding_model": ("trained by time_to_quality" if "time_to_quality" in wanted
                                   else "untrained"),
                "seconds": time.perf_counter() - started, "benchmarks": results,
                "claims": claims(results, device)}

    for name in wanted:
        log(f"{name.replace('_', ' ')} ...")
        if name == "time_to_quality":
            results[name], model = suites.time_to_quality(config, corpus, device, log=log)
        elif name == "decoding":
            if model is None:     # without the trained model, decoding runs on fresh weights
                model = suites.new_model(config, corpus, device)
            results[name] = suites.decoding(config, corpus, model, device, all_threads=all_threads)
        elif name == "compile":
            results[name] = suites.compile_cost(config, corpus, device)
        elif name == "grading":
            results[name] = grading.measure(config.grading_students, seed=config.seed, log=log)
        else:
            results[name] = getattr(suites, name)(config, corpus, device)
        if on_update is not None:
            on_update(report())
    return report()


def merged(earlier: dict[str, Any], results: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """`earlier` (a results file) with the benchmarks of `results` in place of its own, its claims computed
    again, and each merged section's run (date, machine, seconds) listed under "merged"."""
    benchmarks = {**earlier["benchmarks"], **results["benchmarks"]}
    run = {"benchmarks": list(results["benchmarks"]), "date": results["date"], "seconds": results["seconds"],
           "machine": results["machine"]}
    return {**earlier, "benchmarks": benchmarks, "claims": claims(benchmarks, device),
            "merged": [*earlier.get("merged", []), run]}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run of seconds")
    parser.add_argument("--device", choices=("cpu", "cuda"), default=None,
                        help="default: CUDA when present, else CPU")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for the JSON (default %(default)s)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (default 1: CPU time then measures each configuration's "
                             "work, steady on a shared machine; with more, the wall clock times it; the "
                             "decoding benchmark is also timed on torch's default threads, every core, by "
                             "the wall clock); 0 keeps torch's default")
    parser.add_argument("--only", nargs="+", default=None, choices=BENCHMARKS,
                        help="run only these benchmarks (default: all; --quick skips compile, --device cuda "
                             "grading)")
    parser.add_argument("--merge", action="store_true",
                        help="with --only: replace only these benchmarks' sections of the existing JSON and "
                             "keep the others (and the file's machine and date; each merged run is "
                             "listed under 'merged')")
    args = parser.parse_args(argv)
    if args.threads < 0:
        parser.error(f"--threads={args.threads}, expected 0 (torch's default) or a positive count")
    if args.merge and not args.only:
        parser.error("--merge needs --only: the benchmarks whose sections to replace")
    default_threads = torch.get_num_threads()      # before --threads: what a user of the machine gets
    if args.threads:
        torch.set_num_threads(args.threads)
    device = get_device(args.device)
    config = suites.QUICK if args.quick else suites.FULL
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"bench-{device.type}{'-quick' if args.quick else ''}.json"

    earlier = json.loads(path.read_text()) if args.merge and path.exists() else None

    def written(results: dict[str, Any]) -> dict[str, Any]:    # after each benchmark: a long run keeps it
        if earlier is not None:
            results = merged(earlier, results, device)
        path.write_text(json.dumps(results, indent=1) + "\n")
        return results

    new = run(config, device, args.only, log=lambda text: print(text, file=sys.stderr, flush=True),
              on_update=written, all_threads=default_threads)
    results = written(new)
    machine = new["machine"]
    print(f"{machine['device_name']} ({machine['device']}), {machine['torch_threads']} torch threads, "
          f"torch {machine['torch']}; {new['seconds']:.0f} s")
    print(format_table(results["claims"]))
    for note in (_ttq_note(new["benchmarks"]), _grading_note(new["benchmarks"])):     # what this run measured
        if note:
            print(note)
    print(f"wrote {path}" + (f" (merged: {', '.join(new['benchmarks'])})" if earlier is not None else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
