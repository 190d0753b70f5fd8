"""The GitHub workflows for people who host the course there: valid according to actionlint."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "ci.yml"


def _actionlint() -> str:
    exe = shutil.which("actionlint", path=str(Path(sys.executable).parent)) or shutil.which("actionlint")
    if exe is None:
        pytest.fail("actionlint is not installed; it is a dev dependency of the course (pyproject.toml)")
    return exe


def _lint(*paths: Path, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    cmd = [_actionlint(), "-no-color", *map(str, paths)]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)


def test_workflows_pass_actionlint():
    result = _lint(WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr


def test_cpu_job_runs_ci_run_which_runs_make_test_and_gpu_job_runs_make_gpu_check_on_the_gpu_runner():
    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    steps = lambda job: [s.get("run", "") for s in jobs[job]["steps"]]  # noqa: E731
    assert any(".ci/run" in run for run in steps("cpu"))
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    assert jobs["gpu"]["runs-on"] == ["self-hosted", "gpu"]
    assert any("make gpu-check" in run for run in steps("gpu"))


def test_actionlint_rejects_a_broken_workflow(tmp_path):
    # The check above can fail: an unknown runner label and a job with no steps are reported.
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.write_text("on: push\njobs:\n  x:\n    runs-on: [self-hosted, tpu]\n")
    result = _lint(bad, cwd=tmp_path)
    assert result.returncode != 0
    assert "tpu" in result.stdout and "steps" in result.stdout
