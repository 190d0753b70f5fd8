"""The course environment: what `make lab` / `make test` install is what the course declares."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import tomllib
import torch
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _pyproject_requirements() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return set(project["dependencies"]) | set(project["optional-dependencies"]["dev"])


def _environment_yml_requirements() -> set[str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_lists = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip_lists) == 1, "environment.yml should have exactly one pip: section"
    return {r for r in pip_lists[0] if not r.startswith("-")}


def _strip_comment(req: str) -> str:
    return req.split("#", 1)[0].strip()


def test_environment_yml_lists_the_same_requirements_as_pyproject():
    pyproject = {_strip_comment(r) for r in _pyproject_requirements()}
    assert _environment_yml_requirements() == pyproject


def test_environment_yml_pins_the_same_python_family_as_the_course():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "python=3.11" in env["dependencies"]
    assert "--editable ." in next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))


def test_d2l_torch_imports_with_current_numpy_and_pandas():
    # d2l 1.0.3 pins numpy==1.23.5 and pandas==2.0.3; the course runs it on the current stack instead.
    import d2l
    import d2l.torch  # noqa: F401
    import numpy
    import pandas

    assert d2l.__version__ == "1.0.3"
    assert tuple(int(x) for x in numpy.__version__.split(".")[:2]) >= (1, 26)
    assert tuple(int(x) for x in pandas.__version__.split(".")[:2]) >= (2, 1)


def test_pip_check_reports_only_d2ls_own_pins():
    """`pip check` is clean but for d2l 1.0.3's hard pins, the one known exception (docs/maintainers.md)."""
    out = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True)
    problems = [line for line in out.stdout.splitlines() if line.strip() and "No broken" not in line]
    unexpected = [line for line in problems if not line.startswith("d2l 1.0.3 ")]
    assert unexpected == [], f"pip check found problems beyond d2l's pins: {unexpected}"


def test_environment_stamp_is_up_to_date_so_make_is_quick():
    # `make -q env` exits 0 when the environment exists and nothing needs reinstalling.
    if not (ROOT / ".venv" / ".attn-course-installed").exists():
        pytest.skip("environment not created through the Makefile")
    result = subprocess.run(["make", "-q", "env"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def _plan(target: str, **env: str) -> str:
    environment = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"} | env
    return subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True, check=True,
                          env=environment).stdout


def test_make_test_runs_every_notebook_again_on_another_kernel_threads_and_seed():
    plan = _plan("test")
    assert plan.index("--nbval-lax") < plan.index("ATEN_CPU_CAPABILITY=default OMP_NUM_THREADS=2 "
                                                  "ATTN_COURSE_SEED=1 ATTN_COURSE_ARTIFACTS=$artifacts")
    again = _plan("portability").split("ATTN_COURSE_ARTIFACTS=$artifacts", 1)[1]
    assert all(str(path.relative_to(ROOT)) in again for path in sorted(ROOT.glob("notebooks/*.ipynb")))
    # a learner who already runs on the portable kernels gets the second pass on avx2
    assert "ATEN_CPU_CAPABILITY=avx2 " in _plan("portability", ATEN_CPU_CAPABILITY="default")


def _pytest_runs(plan: str) -> list[str]:
    """The arguments of each pytest run in a `make -n` plan that runs the tests (not the notebooks)."""
    runs = [line.split(" -m pytest ", 1) for line in plan.splitlines()]
    return [run[1].strip() for run in runs if len(run) == 2 and run[1].rstrip().endswith(" tests")]


def test_make_unit_leaves_out_the_slow_tests():
    assert _pytest_runs(_plan("unit")) == ['-m "not slow" tests']


def test_make_test_runs_the_quick_tests_then_the_slow_ones():
    assert _pytest_runs(_plan("test")) == ['-m "not slow" tests', "-m slow tests"]


def test_the_slow_marker_is_registered_and_unknown_markers_are_errors():
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "--strict-markers" in options["addopts"].split()
    assert any(marker.startswith("slow:") for marker in options["markers"])


def test_make_gpu_check_runs_every_notebook_the_claims_then_the_benchmarks_on_cuda():
    plan = subprocess.run(["make", "-n", "gpu-check"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout
    steps = ("torch.cuda.is_available()", "notebooks", "attn_course_tools.robustness --device cuda",
             "benchmarks.run --device cuda")
    checks_cuda, notebooks, claims, bench = (plan.find(step) for step in steps)
    assert -1 < checks_cuda < notebooks < claims < bench, plan


@pytest.mark.slow
def test_make_gpu_check_without_a_gpu_fails_at_once_and_says_why():
    if not (ROOT / ".venv" / ".attn-course-installed").exists():
        pytest.skip("environment not created through the Makefile")
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: `make gpu-check` would run for real")
    done = subprocess.run(["make", "gpu-check"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "gpu-check: no CUDA device" in done.stderr      # fails fast, and says why


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_make_lab_serves_jupyterlab_on_the_notebooks(tmp_path):
    if not (ROOT / ".venv" / ".attn-course-installed").exists():
        pytest.skip("environment not created through the Makefile")
    port, token = _free_port(), "attn-course-test"
    args = f"--no-browser --ServerApp.ip=127.0.0.1 --port={port} --IdentityProvider.token={token}"
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path), JUPYTER_CONFIG_DIR=str(tmp_path / "config"))
    proc = subprocess.Popen(
        ["make", "lab", f"LAB_ARGS={args}"], cwd=ROOT, env=env, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline, listing = time.monotonic() + 90, None
        while time.monotonic() < deadline and listing is None:
            try:
                with urllib.request.urlopen(f"{base}/api/contents/notebooks?token={token}", timeout=5) as r:
                    listing = r.read().decode()
            except OSError:
                assert proc.poll() is None, "make lab exited before JupyterLab came up"
                time.sleep(0.5)
        assert listing is not None, "JupyterLab did not answer within 90 s"
        for nb in sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb")):
            assert nb in listing
        with urllib.request.urlopen(f"{base}/lab?token={token}", timeout=10) as r:
            assert r.status == 200 and "JupyterLab" in r.read().decode()
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    """End the server's whole process group (make, jupyter and its kernels)."""
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue
