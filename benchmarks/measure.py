"""How the benchmarks measure: interleaved A/B timings (median of N after warm-ups), peak memory, machine.

Ratios are the claims, not absolute times: on a shared machine the absolute numbers drift with the load,
so the configurations compared by one ratio are timed in alternation (A B B A A B ...) within one run, and
each ratio is the ratio of their medians. Where one side takes many times longer than the other (one
sentence at a time against a batch), the slow side is cut into parts timed between runs of the fast one
(`interleaved_slices`), and the ratio is the slow parts' sum over the fast runs' median.

The clock (`clock_name`): on the CPU, the process's CPU time (time.process_time), which counts the work the
process did and not the time it waited for a core that other programs held; with one torch thread (the
benchmarks' default) it is the compute time of the configuration. On CUDA, wall-clock time around
torch.cuda.synchronize(), since the work happens on the GPU. With several torch threads on the CPU, CPU
time would add up the threads' time and hide what running in parallel saves, so the CPU timings then read
the wall clock (wall=None, the default, decides by torch's thread count at the call; wall=True or False
forces a clock): they are then as exposed to other programs as the user is.

Peak memory (`peak_memory`):
- CUDA: torch.cuda.max_memory_allocated() after torch.cuda.reset_peak_memory_stats(), minus the memory
  allocated before the run: the most tensor memory the configuration held at once beyond its inputs.
- CPU (Linux): the growth of the process's peak resident set (VmHWM in /proc/self/status) during one run,
  after resetting VmHWM to the current resident set (writing 5 to /proc/self/clear_refs) and returning
  freed heap pages to the system (glibc malloc_trim), so that memory freed by an earlier configuration
  cannot hide this one's. tracemalloc does not see torch's CPU tensors, hence this method. It counts every
  page the run touches (tensors, autograd buffers, allocator slack), not only tensors, and has page
  granularity (4 KiB); elsewhere than Linux it reports None.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import gc
import os
import platform
import re
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import torch

from attn_course.validation import check_positive_int

T = TypeVar("T")

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def synchronize(device: torch.device | str) -> None:
    """Wait for queued GPU work so that a timer measures it (no-op on the CPU)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def _wall_on_cpu(wall: bool | None) -> bool:
    """wall as given, or (None) whether torch runs on more than one CPU thread."""
    return torch.get_num_threads() > 1 if wall is None else wall


def clock_name(device: torch.device | str, wall: bool | None = None) -> str:
    """Which clock `time_once` reads on this device with this `wall` (see `timed_call`)."""
    if torch.device(device).type == "cuda":
        return "wall-clock (time.perf_counter) around torch.cuda.synchronize()"
    if _wall_on_cpu(wall):
        return "wall-clock (time.perf_counter)"
    return "process CPU time (time.process_time), all threads of the process"


def timed_call(fn: Callable[[], T], device: torch.device | str,
               wall: bool | None = None) -> tuple[T, float]:
    """fn()'s result and the seconds it took: on the CPU, the process's CPU time, or the wall clock where
    the work is spread over threads (wall=None: when torch uses more than one; True / False: always /
    never); on CUDA, wall-clock with the GPU work included."""
    on_cpu = torch.device(device).type != "cuda"
    if on_cpu and not _wall_on_cpu(wall):
        start = time.process_time()
        result = fn()
        return result, time.process_time() - start
    synchronize(device)
    start = time.perf_counter()
    result = fn()
    synchronize(device)
    return result, time.perf_counter() - start


def time_once(fn: Callable[[], object], device: torch.device | str, wall: bool | None = None) -> float:
    """Seconds one call of fn takes (see `timed_call`)."""
    return timed_call(fn, device, wall)[1]


@contextlib.contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """Run the block with torch's CPU (intra-op) threads set to count, then restore the previous count."""
    check_positive_int("count", count)
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class Timed(NamedTuple):
    """What `interleaved` or `interleaved_slices` measured, per function name.

    samples: the seconds of each timed call.
    outputs: what the function returned: a whole function's last call's result; for a sliced one, the
        list of its parts' results, part 0 first.
    """

    samples: dict[str, list[float]]
    outputs: dict[str, Any]


def interleaved(fns: dict[str, Callable[[], object]], *, repeats: int, warmup: int = 1,
                device: torch.device | str = "cpu") -> Timed:
    """Time every function `repeats` times, in alternation, after `warmup` untimed calls of each.

    The order is reversed every round (A B C, C B A, A B C, ...), so a slow drift of the machine's load
    weighs on each function alike. Returns the seconds of each call and each function's last result.
    """
    if repeats < 1 or warmup < 0:
        raise ValueError(f"repeats={repeats}, warmup={warmup}: expected repeats >= 1 and warmup >= 0")
    names = list(fns)
    outputs: dict[str, Any] = {}
    for _ in range(warmup):
        for name in names:
            outputs[name] = fns[name]()
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            outputs[name], seconds = timed_call(fns[name], device)
            samples[name].append(seconds)
    return Timed(samples, outputs)


def interleaved_slices(whole: dict[str, Callable[[], object]], sliced: dict[str, Callable[[int], object]], *,
                       slices: int, device: torch.device | str = "cpu", wall: bool | None = None) -> Timed:
    """Time a fast pass over all items against a slow one that takes them one at a time, in alternation.

    Each slow pass is cut into `slices` parts (sliced[name](r) does part r) and round r times every `whole`
    function once and part r of every sliced one, the order reversed every round. A slow pass of many
    seconds and a fast one of one second are then timed in the same stretch of time, part by part, so a
    drift of the machine's speed weighs on both alike, as in `interleaved`. Returns the seconds of each
    call per name: `slices` full runs of each whole function, and the `slices` parts of each sliced one
    (their sum is one full pass: see `sliced_ratio`); and the outputs: each whole function's last result,
    each sliced one's list of part results. wall: which clock on the CPU (see `timed_call`).
    """
    if slices < 1:
        raise ValueError(f"slices={slices}, expected slices >= 1")
    names = [*whole, *sliced]
    samples: dict[str, list[float]] = {name: [] for name in names}
    outputs: dict[str, Any] = {name: [None] * slices for name in sliced}
    for r in range(slices):
        for name in names if r % 2 == 0 else names[::-1]:
            if name in whole:
                outputs[name], seconds = timed_call(whole[name], device, wall)
            else:
                outputs[name][r], seconds = timed_call(functools.partial(sliced[name], r), device, wall)
            samples[name].append(seconds)
    return Timed(samples, outputs)


def sliced_ratio(samples: dict[str, list[float]], slow: str, fast: str) -> float:
    """sum(slow parts) / median(fast): how many times faster one full fast pass is than the slow pass."""
    return sum(samples[slow]) / statistics.median(samples[fast])


def round_ratios(samples: dict[str, list[float]], slow: str, fast: str) -> list[float]:
    """Round by round, the ratio that round alone measures: parts x (slow part r) / (fast run r).

    A part and the fast run beside it share the machine's speed of the moment, so the spread of these
    ratios shows how far drift and noise move the claim (each part also holds different items, so some of
    the spread is theirs). `sliced_ratio` is the claim; this is its error bar.
    """
    parts = len(samples[slow])
    return [parts * s / f for s, f in zip(samples[slow], samples[fast], strict=True)]


def summary(samples: list[float]) -> dict[str, float]:
    """Median, min, max and count of a list of timings (seconds)."""
    return {"median_s": statistics.median(samples), "min_s": min(samples), "max_s": max(samples),
            "n": len(samples)}


def ratio(samples: dict[str, list[float]], slow: str, fast: str) -> float:
    """median(slow) / median(fast): how many times faster `fast` is."""
    return statistics.median(samples[slow]) / statistics.median(samples[fast])


# --------------------------------------------------------------------------------------------- memory
def _status_kib(field: str) -> int:
    match = re.search(rf"^{field}:\s+(\d+) kB", _STATUS.read_text(), re.MULTILINE)
    if match is None:
        raise OSError(f"{field} not found in {_STATUS}")
    return int(match.group(1))


def _malloc_trim() -> None:
    name = ctypes.util.find_library("c")
    if name:
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(name).malloc_trim(0)


def cpu_peak_supported() -> bool:
    """Whether this system lets a process reset and read its own peak resident set (Linux)."""
    try:
        _status_kib("VmHWM")
        with open(_CLEAR_REFS, "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def peak_memory(fn: Callable[[], object], device: torch.device | str) -> dict[str, object]:
    """Peak memory of one call of fn beyond what existed before it (see the module docstring).

    Returns {"peak_bytes": int | None, "method": str}.
    """
    device = torch.device(device)
    gc.collect()
    if device.type == "cuda":
        synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        synchronize(device)
        return {"peak_bytes": int(torch.cuda.max_memory_allocated(device) - before),
                "method": "torch.cuda.max_memory_allocated minus memory allocated before"}
    if not cpu_peak_supported():
        return {"peak_bytes": None, "method": "unavailable (needs Linux /proc/self/clear_refs)"}
    _malloc_trim()
    with open(_CLEAR_REFS, "w") as f:
        f.write("5")                                   # VmHWM := VmRSS
    before = _status_kib("VmRSS")
    fn()
    return {"peak_bytes": int(max(_status_kib("VmHWM") - before, 0) * 1024),
            "method": "growth of VmHWM (peak RSS, reset via /proc/self/clear_refs) after malloc_trim"}


# --------------------------------------------------------------------------------------------- machine
def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux, else platform.processor())."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def machine_info(device: torch.device | str) -> dict[str, object]:
    """What the numbers were measured on: CPU, cores, torch threads, versions, device, load."""
    device = torch.device(device)
    info: dict[str, object] = {
        "cpu": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_model(),
        "clock": clock_name(device),
    }
    with contextlib.suppress(OSError, AttributeError):
        info["load_average_1_5_15"] = [round(x, 2) for x in os.getloadavg()]
    with contextlib.suppress(ImportError):
        import d2l
        info["d2l"] = getattr(d2l, "__version__", "unknown")
    return info
