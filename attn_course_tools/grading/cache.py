"""Remember grades between runs, so that grading a folder again regrades only new or changed submissions.

A grade is stored under a key made of everything it depends on: the submission's bytes (sha256), the
grader's version (the source of every course module that judging a submission imports -- the checks and
the learner's library they call, the sandbox, the judging code; `closure.grading_modules` -- and torch's
version), the instructor's hidden inputs for the exercises graded, the exercises and the limits. A module
grading never imports (a widget, the book's tools) is not part of it.
Change any of them and the key changes, so a stale grade is never read back; `--force` regrades all.
The cache is a folder of small JSON files, one per key, each written whole (written aside, then renamed),
so an interrupted run leaves only complete entries and the next run picks up where it stopped.

Nobody can forge an entry: no sandbox can see the folder (the jail shows it nothing of the machine), and
each entry carries its own key, the submission's digest and an HMAC of both with its grade, under a
secret kept in the folder, readable by the grader's user only (`.secret`). An entry that does not match
the key it is read for, the submission, or its HMAC (written by hand, copied from another student's,
altered) is ignored and the submission graded again.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from attn_course_tools.grading.closure import JUDGE, grading_data, grading_modules
from attn_course_tools.grading.records import Limits, SubmissionGrade

#: The cache entries' format; part of every key, so a new format never reads an old entry.
FORMAT = "attn_course.grade-cache/2"

#: Messages that say the grader, not the submission, could not finish (or the file changed under it): such
#: grades are not remembered, so the next run tries again.
_NOT_REMEMBERED = ("the grading sandbox failed", "total time limit", "changed while it was being graded")


def grader_version(roots: Mapping[str, Path] | None = None) -> str:
    """A digest of what judges a submission: the source of the modules judging imports (checks,
    references, sandbox, judging; `closure.grading_modules`), the data files they read
    (`closure.grading_data`: chapter 9's committed seed study, ...) and torch's version. roots: {package:
    folder} to read the packages from (default: where Python imports them from)."""
    digest = hashlib.sha256(f"{FORMAT} torch {torch.__version__}".encode())
    modules = grading_modules(JUDGE, roots)
    for name, path in (*modules.items(), *grading_data(modules).items()):
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


class GradeCache:
    """The grades of earlier runs in `folder`, valid for one grader version (see the module's docstring)."""

    def __init__(self, folder: str | Path, version: str | None = None) -> None:
        self.folder = Path(folder)
        self.version = version if version is not None else grader_version()

    def key(
        self, digest: str, keys: Sequence[str], hidden: Mapping[str, Any] | None, limits: Limits
    ) -> str:
        """The entry's name for a submission with sha256 `digest` graded on `keys` with these inputs."""
        hidden_used = {k: hidden[k] for k in keys if hidden is not None and k in hidden}
        what = {
            "format": FORMAT,
            "grader": self.version,
            "submission": digest,
            "exercises": list(keys),
            "hidden": hidden_used,
            "limits": asdict(limits),
        }
        return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()

    def _secret(self) -> bytes:
        """The folder's HMAC secret, made on first use (readable and writable by this user only)."""
        path = self.folder / ".secret"
        try:
            return path.read_bytes()
        except FileNotFoundError:
            self.folder.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:  # another grader made it meanwhile
                return path.read_bytes()
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(32))
            return path.read_bytes()

    def _mac(self, key: str, grade: dict[str, Any]) -> str:
        message = json.dumps({"key": key, "grade": grade}, sort_keys=True).encode()
        return hmac.new(self._secret(), message, hashlib.sha256).hexdigest()

    def load(self, key: str, path: Path, student: str, digest: str | None = None) -> SubmissionGrade | None:
        """The remembered grade under `key`, for `path` of `student` (whose bytes have sha256 `digest`);
        None if there is none, or it is unreadable, or it does not match its key, the submission or its
        HMAC: then it is simply graded again."""
        try:
            entry = json.loads((self.folder / f"{key}.json").read_text())
            grade = entry["grade"]
            if entry["key"] != key or not hmac.compare_digest(str(entry["mac"]), self._mac(key, grade)):
                return None
            if digest is not None and grade["sha256"] != digest:
                return None
            return SubmissionGrade.from_json(grade, path, student)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def store(self, key: str, result: SubmissionGrade, digest: str) -> bool:
        """Remember `result` under `key`, unless the file changed while it was graded (its digest is not
        `digest`) or the grader could not finish it; whether it was stored."""
        messages = [g.message for g in result.exercises.values()] + result.notes
        if result.sha256 != digest or any(m in text for m in _NOT_REMEMBERED for text in messages):
            return False
        self.folder.mkdir(parents=True, exist_ok=True)
        grade = result.to_json()
        entry = {"key": key, "grade": grade, "mac": self._mac(key, grade)}
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(entry, f)
        os.replace(tmp, self.folder / f"{key}.json")
        return True
